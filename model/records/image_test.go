package records_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/records"
)

func TestAttributeValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		given events.DynamoDBAttributeValue
		want  types.AttributeValue
	}{
		{"string", events.NewStringAttribute("USER#u1"), &types.AttributeValueMemberS{Value: "USER#u1"}},
		{"number keeps its text", events.NewNumberAttribute("25000.5"), &types.AttributeValueMemberN{Value: "25000.5"}},
		{"bool", events.NewBooleanAttribute(true), &types.AttributeValueMemberBOOL{Value: true}},
		{"null", events.NewNullAttribute(), &types.AttributeValueMemberNULL{Value: true}},
		{"binary", events.NewBinaryAttribute([]byte{0, 1, 42}), &types.AttributeValueMemberB{Value: []byte{0, 1, 42}}},
		{"string set", events.NewStringSetAttribute([]string{"Run", "Ride"}), &types.AttributeValueMemberSS{Value: []string{"Run", "Ride"}}},
		{"number set", events.NewNumberSetAttribute([]string{"1", "2"}), &types.AttributeValueMemberNS{Value: []string{"1", "2"}}},
		{"binary set", events.NewBinarySetAttribute([][]byte{{1}, {2}}), &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2}}}},
		{
			"nested list and map",
			events.NewListAttribute([]events.DynamoDBAttributeValue{
				events.NewStringAttribute("Run"),
				events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"slot": events.NewNumberAttribute("3")}),
			}),
			&types.AttributeValueMemberL{Value: []types.AttributeValue{
				&types.AttributeValueMemberS{Value: "Run"},
				&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"slot": &types.AttributeValueMemberN{Value: "3"}}},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := records.AttributeValue(tt.given)
			if err != nil {
				t.Fatalf("AttributeValue: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestAttributeValueNeverPanics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		given map[string]events.DynamoDBAttributeValue
	}{
		{"zero value", map[string]events.DynamoDBAttributeValue{"PK": {}}},
		{"zero value inside a map", map[string]events.DynamoDBAttributeValue{
			"m": events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"x": {}}),
		}},
		{"zero value inside a list", map[string]events.DynamoDBAttributeValue{
			"l": events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewStringAttribute("a"), {}}),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := records.Image(tt.given)
			if !errors.Is(err, model.ErrInvalid) {
				t.Fatalf("got %v, %v; want an ErrInvalid error", got, err)
			}
		})
	}
}

func TestImageNil(t *testing.T) {
	t.Parallel()
	got, err := records.Image(nil)
	if got != nil || err != nil {
		t.Fatalf("got %v, %v; want nil, nil", got, err)
	}
}
