package dynerr_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/store/dynerr"
)

func reasons(codes ...string) []types.CancellationReason {
	out := make([]types.CancellationReason, len(codes))
	for i, c := range codes {
		out[i] = types.CancellationReason{Code: aws.String(c)}
	}
	return out
}

// TestTranslate: each DynamoDB failure reads as the one domain error a
// caller classifies it by, and the original stays in the chain.
func TestTranslate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want error // nil: passed through unclassified
	}{
		{"failed condition", &types.ConditionalCheckFailedException{Message: aws.String("x")}, model.ErrConflict},
		{"cancelled on a condition", &types.TransactionCanceledException{CancellationReasons: reasons("None", "ConditionalCheckFailed")}, model.ErrConflict},
		{"cancelled on a conflict", &types.TransactionCanceledException{CancellationReasons: reasons("TransactionConflict", "None")}, model.ErrRetryable},
		{"cancelled on throttling", &types.TransactionCanceledException{CancellationReasons: reasons("ThrottlingError")}, model.ErrRetryable},
		{"throughput exceeded", &types.ProvisionedThroughputExceededException{}, model.ErrRetryable},
		{"request limit", &types.RequestLimitExceeded{}, model.ErrRetryable},
		{"transaction in progress", &types.TransactionInProgressException{}, model.ErrRetryable},
		{"transaction conflict", &types.TransactionConflictException{}, model.ErrRetryable},
		{"throttling by code", &smithy.GenericAPIError{Code: "ThrottlingException"}, model.ErrRetryable},
		{"missing table", &types.ResourceNotFoundException{}, model.ErrNotFound},
		{"anything else", errors.New("boom"), nil},
	}
	domain := []error{model.ErrConflict, model.ErrRetryable, model.ErrNotFound}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := dynerr.Translate(fmt.Errorf("call: %w", tt.err))
			for _, d := range domain {
				if errors.Is(got, d) != (d == tt.want) {
					t.Errorf("Translate(%v) = %v: errors.Is %v is %v", tt.err, got, d, errors.Is(got, d))
				}
			}
			var te *dynerr.TransactionError
			if !errors.As(got, &te) && !errors.Is(got, tt.err) {
				t.Errorf("Translate(%v) = %v lost the original", tt.err, got)
			}
		})
	}
}

// TestFailedIndexes: the items whose condition failed, in sent order.
func TestFailedIndexes(t *testing.T) {
	t.Parallel()
	te := &dynerr.TransactionError{Reasons: []string{"ConditionalCheckFailed", "None", "ConditionalCheckFailed"}}
	if got := te.FailedIndexes(); !slices.Equal(got, []int{0, 2}) {
		t.Fatalf("FailedIndexes() = %v, want [0 2]", got)
	}
}
