package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/commitcollect/backend/model/store/metering"
	"github.com/commitcollect/backend/test/awsrecord"
)

func TestPercentile(t *testing.T) {
	t.Parallel()
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name  string
		given []time.Duration
		p     float64
		want  time.Duration
	}{
		{"none", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"median of unsorted", ms(5, 1, 3), 0.5, 3 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(seq(100)...), 0.99, 99 * time.Millisecond},
		{"max", ms(4, 9, 2), 1, 9 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Percentile(tt.given, tt.p); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

func TestVerdict(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		got, limit    float64
		atMost        bool
		wantPrefix    string
		wantSubstring string
	}{
		{"under a ceiling", 4, 10, true, "met", "6 to spare"},
		{"at a ceiling", 5, 5, true, "met", "0 to spare"},
		{"over a ceiling", 13, 10, true, "MISSED", "by 3 (1.30× the limit)"},
		{"above a floor", 20, 15, false, "met", "5 to spare"},
		{"below a floor", 6, 15, false, "MISSED", "by 9 (0.40× the limit)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Verdict(tt.got, tt.limit, tt.atMost)
			if !strings.HasPrefix(got, tt.wantPrefix) || !strings.Contains(got, tt.wantSubstring) {
				t.Errorf("got %q, want %q … %q", got, tt.wantPrefix, tt.wantSubstring)
			}
		})
	}
}

func TestDesignMinimum(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		n, size     int
		wantProjRCU float64
	}{
		{"nothing to read", 0, 300, 1},
		{"a month fits one read unit", 13, 300, 2},
		{"a month of 30", 30, 300, 4},
		{"3000 workouts", 3000, 300, 1 + 220},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in, pr := DesignMinimum(tt.n, tt.size)
			if in != (metering.Units{Requests: 2, WCU: 3}) || pr.Requests != 3 || pr.WCU != 1 || pr.RCU != tt.wantProjRCU {
				t.Errorf("got ingest %+v, projection %+v; want 2/0/3 and 3/%v/1", in, pr, tt.wantProjRCU)
			}
		})
	}
}

func TestItemSize(t *testing.T) {
	t.Parallel()
	item := map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "USER#u1"}, // 2 + 7
		"n":  &types.AttributeValueMemberN{Value: "12345"},   // 1 + 4
		"ok": &types.AttributeValueMemberBOOL{Value: true},   // 2 + 1
		"tags": &types.AttributeValueMemberL{Value: []types.AttributeValue{ // 4 + 3 + (1+1)
			&types.AttributeValueMemberS{Value: "a"}}},
	}
	if got, want := ItemSize(item), 9+5+3+9; got != want {
		t.Errorf("got %d bytes, want %d", got, want)
	}
}

func TestMinusSnapshot(t *testing.T) {
	t.Parallel()
	before := metering.Snapshot{Units: metering.Units{Requests: 2, RCU: 1},
		ByOp: map[string]metering.Units{"GetItem": {Requests: 2, RCU: 1}}}
	after := metering.Snapshot{Units: metering.Units{Requests: 5, RCU: 1, WCU: 3},
		ByOp: map[string]metering.Units{"GetItem": {Requests: 2, RCU: 1}, "PutItem": {Requests: 3, WCU: 3}}}
	got := MinusSnapshot(after, before)
	if got.Units != (metering.Units{Requests: 3, WCU: 3}) || len(got.ByOp) != 1 || got.ByOp["PutItem"] != (metering.Units{Requests: 3, WCU: 3}) {
		t.Errorf("got %+v", got)
	}
	if s := OpsPerEvent(got, 3); s != "PutItem 1.00 (1.00 WCU)" {
		t.Errorf("ops per event: got %q", s)
	}
}

func TestCallsPerEvent(t *testing.T) {
	t.Parallel()
	n := func(m map[string]int) map[string]awsrecord.Calls {
		out := map[string]awsrecord.Calls{}
		for name, c := range m {
			out[name] = awsrecord.Calls{N: c}
		}
		return out
	}
	for _, tc := range []struct {
		name          string
		before, after map[string]int
		n             int
		total         float64
		line          string
	}{
		{"nothing called", nil, nil, 10, 0, "none"},
		{"only what changed, most frequent first", map[string]int{"DynamoDB GetItem": 5, "DynamoDB Query": 1},
			map[string]int{"DynamoDB GetItem": 5, "DynamoDB Query": 11, "DynamoDB Streams GetRecords": 20}, 10,
			3, "DynamoDB Streams GetRecords 2.00 · DynamoDB Query 1.00"},
		{"ties by name", nil, map[string]int{"b": 1, "a": 1}, 0, 2, "a 1.00 · b 1.00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			total, line := CallsPerEvent(n(tc.before), n(tc.after), tc.n)
			if total != tc.total || line != tc.line {
				t.Errorf("got %v %q, want %v %q", total, line, tc.total, tc.line)
			}
		})
	}
}

func TestMeanWaits(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, tc := range []struct {
		name          string
		before, after map[string]awsrecord.Calls
		want          string
	}{
		{"nothing called", nil, nil, "none"},
		{"the calls between the tallies, longest first",
			map[string]awsrecord.Calls{"Query": {N: 10, Wait: 100 * ms}, "GetItem": {N: 5, Wait: 50 * ms}},
			map[string]awsrecord.Calls{"Query": {N: 13, Wait: 130 * ms}, "GetItem": {N: 5, Wait: 50 * ms},
				"TransactWriteItems": {N: 2, Wait: 80 * ms}},
			"TransactWriteItems 40.0 ms · Query 10.0 ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MeanWaits(tc.before, tc.after); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
