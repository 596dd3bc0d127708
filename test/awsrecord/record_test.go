package awsrecord

import (
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

func TestDescribeCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		service, op string
		given       any
		want        []RecordedCall
	}{
		{
			name: "query on an index", service: "DynamoDB", op: "Query",
			given: &dynamodb.QueryInput{TableName: aws.String("Main"), IndexName: aws.String("GSI1")},
			want:  []RecordedCall{{Service: "DynamoDB", Operation: "Query", Action: "dynamodb:Query", Table: "Main", Index: "GSI1"}},
		},
		{
			name: "a transaction is authorised per item", service: "DynamoDB", op: "TransactWriteItems",
			given: &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Update: &types.Update{TableName: aws.String("Main")}},
				{Put: &types.Put{TableName: aws.String("Main")}},
				{ConditionCheck: &types.ConditionCheck{TableName: aws.String("Other")}},
			}},
			want: []RecordedCall{
				{Service: "DynamoDB", Operation: "TransactWriteItems", Action: "dynamodb:UpdateItem", Table: "Main"},
				{Service: "DynamoDB", Operation: "TransactWriteItems", Action: "dynamodb:PutItem", Table: "Main"},
				{Service: "DynamoDB", Operation: "TransactWriteItems", Action: "dynamodb:ConditionCheckItem", Table: "Other"},
			},
		},
		{
			name: "a batch names each table", service: "DynamoDB", op: "BatchWriteItem",
			given: &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"B": nil, "A": nil}},
			want: []RecordedCall{
				{Service: "DynamoDB", Operation: "BatchWriteItem", Action: "dynamodb:BatchWriteItem", Table: "A"},
				{Service: "DynamoDB", Operation: "BatchWriteItem", Action: "dynamodb:BatchWriteItem", Table: "B"},
			},
		},
		{
			name: "invoke is lambda:InvokeFunction", service: "Lambda", op: "Invoke",
			given: &lambda.InvokeInput{FunctionName: aws.String("worker")},
			want:  []RecordedCall{{Service: "Lambda", Operation: "Invoke", Action: "lambda:InvokeFunction", Lambda: "worker"}},
		},
		{
			name: "parameter by name", service: "SSM", op: "GetParameter",
			given: &ssm.GetParameterInput{Name: aws.String("arn:aws:ssm:r:1:parameter/p")},
			want:  []RecordedCall{{Service: "SSM", Operation: "GetParameter", Action: "ssm:GetParameter", Parameter: "arn:aws:ssm:r:1:parameter/p"}},
		},
		{
			name: "kms key and encryption context", service: "KMS", op: "GenerateDataKey",
			given: &kms.GenerateDataKeyInput{KeyId: aws.String("arn:aws:kms:r:1:key/k"), EncryptionContext: map[string]string{"purpose": "p", "userId": "u"}},
			want: []RecordedCall{{Service: "KMS", Operation: "GenerateDataKey", Action: "kms:GenerateDataKey", Key: "arn:aws:kms:r:1:key/k",
				EncryptionContext: map[string]string{"purpose": "p", "userId": "u"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := describeCall(tt.service, tt.op, tt.given); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
