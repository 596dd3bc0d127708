package streams_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/commitcollect/backend/model/streams"
)

// shardedStream is an in-memory stream with shard lineage, for the cases
// DynamoDB Local cannot be made to produce on demand (shard roll-over,
// paginated shard lists, expired iterators, throttling). It implements the
// reader's own narrow API interface.
type shardedStream struct {
	shards      []types.Shard
	records     map[string][]types.Record
	closed      map[string]bool
	expireOnce  map[string]bool
	throttleOne bool
	pageSize    int
}

func (s *shardedStream) DescribeStream(_ context.Context, in *dynamodbstreams.DescribeStreamInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	start := 0
	if in.ExclusiveStartShardId != nil {
		for i, sh := range s.shards {
			if *sh.ShardId == *in.ExclusiveStartShardId {
				start = i + 1
			}
		}
	}
	end := min(start+s.pageSize, len(s.shards))
	d := &types.StreamDescription{Shards: s.shards[start:end]}
	if end < len(s.shards) {
		d.LastEvaluatedShardId = s.shards[end-1].ShardId
	}
	return &dynamodbstreams.DescribeStreamOutput{StreamDescription: d}, nil
}

// Iterators are "shard/position" strings.
func (s *shardedStream) GetShardIterator(_ context.Context, in *dynamodbstreams.GetShardIteratorInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	pos := 0
	if in.ShardIteratorType == types.ShardIteratorTypeAfterSequenceNumber {
		for i, r := range s.records[*in.ShardId] {
			if *r.Dynamodb.SequenceNumber == *in.SequenceNumber {
				pos = i + 1
			}
		}
	}
	return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String(*in.ShardId + "/" + strconv.Itoa(pos))}, nil
}

func (s *shardedStream) GetRecords(_ context.Context, in *dynamodbstreams.GetRecordsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	if s.throttleOne {
		s.throttleOne = false
		return nil, &types.LimitExceededException{Message: aws.String("slow down")}
	}
	var shard string
	var pos int
	if _, err := fmt.Sscanf(*in.ShardIterator, "%s", &shard); err != nil {
		return nil, err
	}
	for i := len(shard) - 1; i >= 0; i-- {
		if shard[i] == '/' {
			pos, _ = strconv.Atoi(shard[i+1:])
			shard = shard[:i]
			break
		}
	}
	if s.expireOnce[shard] && pos > 0 {
		delete(s.expireOnce, shard)
		return nil, &types.ExpiredIteratorException{Message: aws.String("expired")}
	}
	recs := s.records[shard][pos:]
	if n := int(aws.ToInt32(in.Limit)); len(recs) > n {
		recs = recs[:n]
	}
	next := pos + len(recs)
	out := &dynamodbstreams.GetRecordsOutput{Records: recs}
	if !(s.closed[shard] && next == len(s.records[shard])) {
		out.NextShardIterator = aws.String(shard + "/" + strconv.Itoa(next))
	}
	return out, nil
}

func rec(seq int, sk string) types.Record {
	return types.Record{
		EventID: aws.String("e" + strconv.Itoa(seq)), EventName: types.OperationTypeInsert,
		Dynamodb: &types.StreamRecord{
			SequenceNumber:              aws.String(fmt.Sprintf("%021d", seq)),
			ApproximateCreationDateTime: aws.Time(time.Unix(1700000000, 0)),
			Keys:                        map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "USER#u"}, "SK": &types.AttributeValueMemberS{Value: sk}},
			StreamViewType:              types.StreamViewTypeNewAndOldImages,
		},
	}
}

func TestShardLineageParentsFirst(t *testing.T) {
	t.Parallel()
	// Listed child-first and split over pages: the reader must still finish
	// each parent before its child.
	s := &shardedStream{
		pageSize: 1,
		shards: []types.Shard{
			{ShardId: aws.String("shard-a2"), ParentShardId: aws.String("shard-a1")},
			{ShardId: aws.String("shard-a1"), ParentShardId: aws.String("shard-a0")},
			{ShardId: aws.String("shard-a0"), ParentShardId: aws.String("shard-gone")}, // parent trimmed away
		},
		records: map[string][]types.Record{
			"shard-a0": {rec(1, "A"), rec(2, "B"), rec(3, "C")},
			"shard-a1": {rec(4, "D"), rec(5, "E")},
			"shard-a2": {rec(6, "F")},
		},
		closed:      map[string]bool{"shard-a0": true, "shard-a1": true},
		expireOnce:  map[string]bool{"shard-a0": true},
		throttleOne: true,
	}
	var got []string
	r := streams.NewReader(s, "arn:aws:dynamodb:ap-southeast-2:1:table/T/stream/x", streams.Options{BatchSize: 2})
	err := r.Drain(context.Background(), func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		got = append(got, sks(ev.Records)...)
		return events.DynamoDBEventResponse{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"A", "B", "C", "D", "E", "F"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("order: got %v, want %v (parents before children, nothing twice after an expired iterator)", got, want)
	}
}

// A reader killed part-way down a lineage resumes from the checkpoints: the
// finished parent is not read again, and at most the one batch that was in
// flight is delivered twice.
func TestRestartAcrossShardBoundary(t *testing.T) {
	t.Parallel()
	newStream := func() *shardedStream {
		return &shardedStream{
			pageSize: 2,
			shards: []types.Shard{
				{ShardId: aws.String("shard-b1"), ParentShardId: aws.String("shard-b0")},
				{ShardId: aws.String("shard-b0")},
			},
			records: map[string][]types.Record{
				"shard-b0": {rec(1, "A"), rec(2, "B"), rec(3, "C")},
				"shard-b1": {rec(4, "D"), rec(5, "E"), rec(6, "F"), rec(7, "G")},
			},
			closed: map[string]bool{"shard-b0": true},
		}
	}
	const arn = "arn:aws:dynamodb:ap-southeast-2:1:table/T/stream/y"
	for _, stopAfter := range []string{"B", "C", "E"} {
		t.Run("killed after "+stopAfter, func(t *testing.T) {
			t.Parallel()
			cp := &streams.MemoryCheckpoints{}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var first []string
			r := streams.NewReader(newStream(), arn, streams.Options{BatchSize: 2, Checkpoints: cp, PollInterval: time.Millisecond})
			_ = r.Run(ctx, func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
				first = append(first, sks(ev.Records)...)
				if first[len(first)-1] == stopAfter {
					cancel() // the process dies with this batch in flight
				}
				return events.DynamoDBEventResponse{}, nil
			})
			var second []string
			r = streams.NewReader(newStream(), arn, streams.Options{BatchSize: 2, Checkpoints: cp})
			if err := r.Drain(context.Background(), func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
				second = append(second, sks(ev.Records)...)
				return events.DynamoDBEventResponse{}, nil
			}); err != nil {
				t.Fatal(err)
			}
			all := []string{"A", "B", "C", "D", "E", "F", "G"}
			if len(second) == 0 {
				t.Fatalf("first run %v, second run read nothing", first)
			}
			// The second run starts at most one batch (2 records) before
			// where the first stopped, and then reads the rest in order.
			start := -1
			for i, sk := range all {
				if sk == second[0] {
					start = i
				}
			}
			if start < 0 || !reflect.DeepEqual(second, all[start:]) || len(first)-start > 2 || start > len(first) {
				t.Fatalf("first run %v, second run %v: want the second to resume within one batch of where the first stopped", first, second)
			}
		})
	}
}
