// Package records reads a DynamoDB stream record's images as the domain
// reads an item: Lambda's attribute values converted into the SDK's, a
// record's key, and an image decoded into an entity, normalized and
// failing closed on a newer schema (Unmarshal, which the store's reads use
// too). Projections read their records through it and reach no adapter.
package records

import (
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
)

// AttributeValue converts one stream attribute value, as aws-lambda-go
// delivers it, into the SDK v2 attribute value Unmarshal decodes. It checks
// DataType before calling the matching accessor (the accessors panic on any
// other type) and returns an error matching model.ErrInvalid for a value it
// cannot read, never a panic.
func AttributeValue(av events.DynamoDBAttributeValue) (out types.AttributeValue, err error) {
	defer func() {
		// A zero DynamoDBAttributeValue claims to be Binary but holds no
		// value, and its accessor panics on the type assertion; DataType
		// cannot tell that case apart, so it is caught here.
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("attribute value: %v: %w", r, model.ErrInvalid)
		}
	}()
	switch av.DataType() {
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: av.String()}, nil
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: av.Number()}, nil
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: av.Boolean()}, nil
	case events.DataTypeNull:
		return &types.AttributeValueMemberNULL{Value: av.IsNull()}, nil
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: av.Binary()}, nil
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: av.StringSet()}, nil
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: av.NumberSet()}, nil
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: av.BinarySet()}, nil
	case events.DataTypeList:
		list := av.List()
		l := make([]types.AttributeValue, len(list))
		for i, v := range list {
			if l[i], err = AttributeValue(v); err != nil {
				return nil, fmt.Errorf("list[%d]: %w", i, err)
			}
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case events.DataTypeMap:
		m, err := Image(av.Map())
		if err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	}
	return nil, fmt.Errorf("attribute value: unknown data type %v: %w", av.DataType(), model.ErrInvalid)
}

// Image converts a whole stream image (Keys, NewImage or OldImage). A nil
// image converts to nil. Errors name the attribute and match
// model.ErrInvalid.
func Image(img map[string]events.DynamoDBAttributeValue) (map[string]types.AttributeValue, error) {
	if img == nil {
		return nil, nil
	}
	out := make(map[string]types.AttributeValue, len(img))
	for name, v := range img {
		av, err := AttributeValue(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", name, err)
		}
		out[name] = av
	}
	return out, nil
}

// RecordKey is the primary key in a stream record's Keys image; an error
// matching model.ErrInvalid when PK or SK is missing or not a string.
func RecordKey(img map[string]events.DynamoDBAttributeValue) (model.Key, error) {
	item, err := Image(img)
	if err != nil {
		return model.Key{}, err
	}
	pk, ok1 := item["PK"].(*types.AttributeValueMemberS)
	sk, ok2 := item["SK"].(*types.AttributeValueMemberS)
	if !ok1 || !ok2 {
		return model.Key{}, fmt.Errorf("no string PK and SK: %w", model.ErrInvalid)
	}
	return model.Key{PK: pk.Value, SK: sk.Value}, nil
}

// DecodeImage decodes a stream record's image into e as the store reads an
// item (Unmarshal: normalized, failing closed on a newer schema).
func DecodeImage(img map[string]events.DynamoDBAttributeValue, e model.Entity) error {
	if img == nil {
		return fmt.Errorf("image missing (stream view must be NEW_AND_OLD_IMAGES): %w", model.ErrInvalid)
	}
	item, err := Image(img)
	if err != nil {
		return err
	}
	return Unmarshal(item, e)
}

// Unmarshal decodes an item into e and normalizes it; it fails closed
// (model.ErrUnsupportedSchema) on an item written by a newer schema, and
// matches model.ErrInvalid on one it cannot read. Every read of an item,
// from the table or from a stream, decodes through it.
func Unmarshal(item map[string]types.AttributeValue, e model.Entity) error {
	if err := attributevalue.UnmarshalMap(item, e); err != nil {
		return fmt.Errorf("unmarshal item: %v: %w", err, model.ErrInvalid)
	}
	if err := e.Normalize(); err != nil {
		return fmt.Errorf("normalize %s: %w", e.ItemKey(), err)
	}
	return nil
}
