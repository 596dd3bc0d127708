// Package streams is the DynamoDB Streams adapter: it reads a table's stream
// shard by shard (parents before children), converts each record into the
// events.DynamoDBEventRecord Lambda would deliver, hands batches to a
// Lambda-shaped handler honouring its partial batch response, and
// checkpoints so a restart resumes. The local stack, the replay script and the
// tests use it; in AWS, Lambda's event source mapping does the same job.
package streams

import (
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/commitcollect/backend/model"
)

// ToLambdaRecord converts a DynamoDB Streams record into the record Lambda
// delivers to a function subscribed to streamARN. It returns ErrInvalid for
// a record without a stream payload.
func ToLambdaRecord(r types.Record, streamARN string) (events.DynamoDBEventRecord, error) {
	if r.Dynamodb == nil {
		return events.DynamoDBEventRecord{}, fmt.Errorf("convert stream record %s: no dynamodb payload: %w", aws.ToString(r.EventID), model.ErrInvalid)
	}
	d := r.Dynamodb
	keys, err := toLambdaMap(d.Keys)
	if err != nil {
		return events.DynamoDBEventRecord{}, fmt.Errorf("convert stream record %s keys: %w", aws.ToString(r.EventID), err)
	}
	newImage, err := toLambdaMap(d.NewImage)
	if err != nil {
		return events.DynamoDBEventRecord{}, fmt.Errorf("convert stream record %s new image: %w", aws.ToString(r.EventID), err)
	}
	oldImage, err := toLambdaMap(d.OldImage)
	if err != nil {
		return events.DynamoDBEventRecord{}, fmt.Errorf("convert stream record %s old image: %w", aws.ToString(r.EventID), err)
	}
	out := events.DynamoDBEventRecord{
		AWSRegion:      aws.ToString(r.AwsRegion),
		EventID:        aws.ToString(r.EventID),
		EventName:      string(r.EventName),
		EventSource:    aws.ToString(r.EventSource),
		EventVersion:   aws.ToString(r.EventVersion),
		EventSourceArn: streamARN,
		Change: events.DynamoDBStreamRecord{
			Keys:           keys,
			NewImage:       newImage,
			OldImage:       oldImage,
			SequenceNumber: aws.ToString(d.SequenceNumber),
			SizeBytes:      aws.ToInt64(d.SizeBytes),
			StreamViewType: string(d.StreamViewType),
		},
	}
	if d.ApproximateCreationDateTime != nil {
		out.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: *d.ApproximateCreationDateTime}
	}
	if out.EventSource == "" {
		out.EventSource = "aws:dynamodb"
	}
	if r.UserIdentity != nil {
		out.UserIdentity = &events.DynamoDBUserIdentity{Type: aws.ToString(r.UserIdentity.Type), PrincipalID: aws.ToString(r.UserIdentity.PrincipalId)}
	}
	if out.AWSRegion == "" {
		out.AWSRegion = regionOf(streamARN)
	}
	return out, nil
}

// regionOf reads the region out of an ARN (arn:aws:dynamodb:REGION:…).
func regionOf(arn string) string {
	parts := strings.SplitN(arn, ":", 5)
	if len(parts) < 4 {
		return ""
	}
	return parts[3]
}

func toLambdaMap(m map[string]types.AttributeValue) (map[string]events.DynamoDBAttributeValue, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(m))
	for k, v := range m {
		av, err := toLambdaAV(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
		out[k] = av
	}
	return out, nil
}

func toLambdaAV(v types.AttributeValue) (events.DynamoDBAttributeValue, error) {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value), nil
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value), nil
	case *types.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value), nil
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value), nil
	case *types.AttributeValueMemberNULL:
		return events.NewNullAttribute(), nil
	case *types.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value), nil
	case *types.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value), nil
	case *types.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value), nil
	case *types.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			av, err := toLambdaAV(e)
			if err != nil {
				return events.DynamoDBAttributeValue{}, fmt.Errorf("list element %d: %w", i, err)
			}
			l[i] = av
		}
		return events.NewListAttribute(l), nil
	case *types.AttributeValueMemberM:
		m, err := toLambdaMap(v.Value)
		if err != nil {
			return events.DynamoDBAttributeValue{}, err
		}
		return events.NewMapAttribute(m), nil
	}
	return events.DynamoDBAttributeValue{}, fmt.Errorf("attribute value of type %T: %w", v, model.ErrInvalid)
}
