// Package awsrecord records every AWS call a process makes, as the IAM
// actions and resources it needs, so a test can compare what the code does
// with what its role grants (test/terraform/iam_test.go). Tests install it
// through handlers/config.Instrument; nothing that ships builds it.
package awsrecord

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// RecordCallsEnv names a file: when set, FromEnv appends every AWS call the
// process makes to it as one JSON line (RecordedCall). The function's name
// comes from AWS_LAMBDA_FUNCTION_NAME (set by Lambda and its emulator).
const RecordCallsEnv = "CC_RECORD_AWS_CALLS"

// RecordedCall is one IAM-authorised action of an AWS call: a
// TransactWriteItems is authorised (and recorded) per item as PutItem,
// UpdateItem, DeleteItem or ConditionCheckItem on that item's table.
type RecordedCall struct {
	Function  string `json:"function"`
	Service   string `json:"service"`   // the SDK's service id, e.g. "DynamoDB"
	Operation string `json:"operation"` // the API operation, e.g. "TransactWriteItems"
	Action    string `json:"action"`    // the IAM action, e.g. "dynamodb:PutItem"
	Table     string `json:"table,omitempty"`
	Index     string `json:"index,omitempty"`
	Stream    string `json:"stream,omitempty"`
	Lambda    string `json:"lambdaFunction,omitempty"`
	Parameter string `json:"parameter,omitempty"`
	Queue     string `json:"queue,omitempty"`
	Key       string `json:"kmsKey,omitempty"`
	// EncryptionContext is a KMS call's encryption context (the policy's
	// kms:EncryptionContext conditions are evaluated on it).
	EncryptionContext map[string]string `json:"encryptionContext,omitempty"`
}

// iamPrefix maps the SDK's service id to the IAM service prefix.
var iamPrefix = map[string]string{
	"DynamoDB": "dynamodb", "DynamoDB Streams": "dynamodb", "Lambda": "lambda", "SSM": "ssm", "SQS": "sqs", "KMS": "kms",
}

// RecordCalls adds a middleware to cfg that writes a RecordedCall line to w
// for every call (before it is sent, so refused calls are recorded too).
// Writes are serialised; write errors are ignored (recording is a test aid).
func RecordCalls(cfg *aws.Config, w io.Writer, function string) {
	var mu sync.Mutex
	cfg.APIOptions = append(cfg.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("RecordAWSCalls",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				calls := describeCall(awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), in.Parameters)
				mu.Lock()
				for _, c := range calls {
					c.Function = function
					if b, err := json.Marshal(c); err == nil {
						_, _ = w.Write(append(b, '\n'))
					}
				}
				mu.Unlock()
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	})
}

// FromEnv installs RecordCalls when RecordCallsEnv is set (a
// handlers/config.Instrument).
func FromEnv(cfg *aws.Config) error {
	path := os.Getenv(RecordCallsEnv)
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: %w", RecordCallsEnv, err)
	}
	RecordCalls(cfg, f, os.Getenv("AWS_LAMBDA_FUNCTION_NAME"))
	return nil
}

// describeCall turns one operation's input into the IAM actions it needs and
// the resources they name (read by reflection from the SDK's input structs:
// TableName, IndexName, StreamArn, FunctionName, Name, QueueUrl, KeyId,
// RequestItems, TransactItems).
func describeCall(service, op string, params any) []RecordedCall {
	prefix := iamPrefix[service]
	if prefix == "" {
		prefix = strings.ToLower(strings.ReplaceAll(service, " ", ""))
	}
	base := RecordedCall{Service: service, Operation: op, Action: prefix + ":" + op}
	v := reflect.Indirect(reflect.ValueOf(params))
	if !v.IsValid() || v.Kind() != reflect.Struct {
		return []RecordedCall{base}
	}
	str := func(s reflect.Value, field string) string {
		f := s.FieldByName(field)
		if !f.IsValid() {
			return ""
		}
		if f.Kind() == reflect.Pointer {
			if f.IsNil() {
				return ""
			}
			f = f.Elem()
		}
		if f.Kind() != reflect.String {
			return ""
		}
		return f.String()
	}
	switch op {
	case "TransactWriteItems", "TransactGetItems":
		var out []RecordedCall
		items := v.FieldByName("TransactItems")
		for i := 0; items.IsValid() && i < items.Len(); i++ {
			item := items.Index(i)
			for _, kind := range []struct{ field, action string }{
				{"Put", "PutItem"}, {"Update", "UpdateItem"}, {"Delete", "DeleteItem"},
				{"ConditionCheck", "ConditionCheckItem"}, {"Get", "GetItem"},
			} {
				f := item.FieldByName(kind.field)
				if f.IsValid() && !f.IsNil() {
					c := base
					c.Action, c.Table = prefix+":"+kind.action, str(f.Elem(), "TableName")
					out = append(out, c)
				}
			}
		}
		return out
	case "BatchWriteItem", "BatchGetItem":
		var out []RecordedCall
		if m := v.FieldByName("RequestItems"); m.IsValid() {
			var tables []string
			for _, k := range m.MapKeys() {
				tables = append(tables, k.String())
			}
			sort.Strings(tables)
			for _, t := range tables {
				c := base
				c.Table = t
				out = append(out, c)
			}
		}
		return out
	}
	c := base
	c.Table, c.Index, c.Stream = str(v, "TableName"), str(v, "IndexName"), str(v, "StreamArn")
	c.Queue, c.Key = str(v, "QueueUrl"), str(v, "KeyId")
	if f := v.FieldByName("EncryptionContext"); f.IsValid() && f.CanInterface() {
		if ec, ok := f.Interface().(map[string]string); ok && len(ec) > 0 {
			c.EncryptionContext = ec
		}
	}
	switch prefix {
	case "lambda":
		c.Lambda = str(v, "FunctionName")
		if op == "Invoke" {
			c.Action = "lambda:InvokeFunction"
		}
	case "ssm":
		c.Parameter = str(v, "Name")
	}
	return []RecordedCall{c}
}
