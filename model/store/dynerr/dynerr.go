// Package dynerr reads DynamoDB's failures in the domain's error
// vocabulary (model.ErrConflict, ErrRetryable, ErrNotFound), keeping the
// original in the chain, and keeps a cancelled transaction's reason for
// each item. The store and its purge classify their writes with it.
package dynerr

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/commitcollect/backend/model"
)

// TransactionError reports why DynamoDB cancelled a transaction: one reason
// code per item, in the order the items were sent ("None" for items that were
// fine). It matches model.ErrConflict when any reason is a failed condition.
type TransactionError struct {
	Reasons []string
}

// Error implements error.
func (e *TransactionError) Error() string {
	return "transaction cancelled: [" + strings.Join(e.Reasons, ", ") + "]"
}

// Is lets errors.Is(err, model.ErrConflict) match a condition failure and
// errors.Is(err, model.ErrRetryable) match a conflict with another transaction or
// throttling.
func (e *TransactionError) Is(target error) bool {
	for _, r := range e.Reasons {
		switch {
		case target == model.ErrConflict && r == "ConditionalCheckFailed":
			return true
		case target == model.ErrRetryable && (r == "TransactionConflict" || r == "ThrottlingError" || r == "ProvisionedThroughputExceeded"):
			return true
		}
	}
	return false
}

// FailedIndexes returns the indexes of the items whose condition failed.
func (e *TransactionError) FailedIndexes() []int {
	var out []int
	for i, r := range e.Reasons {
		if r == "ConditionalCheckFailed" {
			out = append(out, i)
		}
	}
	return out
}

// Translate maps DynamoDB's errors onto model's vocabulary, keeping the
// original in the chain: a failed condition is model.ErrConflict, a
// cancelled transaction a *TransactionError, throttling and transaction
// conflicts model.ErrRetryable, a missing table model.ErrNotFound.
func Translate(err error) error {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("%w: %w", model.ErrConflict, err)
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		te := &TransactionError{}
		for _, r := range tce.CancellationReasons {
			te.Reasons = append(te.Reasons, aws.ToString(r.Code))
		}
		return te
	}
	var (
		tip  *types.TransactionInProgressException
		pte  *types.ProvisionedThroughputExceededException
		rle  *types.RequestLimitExceeded
		tce2 *types.TransactionConflictException
	)
	if errors.As(err, &tip) || errors.As(err, &pte) || errors.As(err, &rle) || errors.As(err, &tce2) {
		return fmt.Errorf("%w: %w", model.ErrRetryable, err)
	}
	var ae interface{ ErrorCode() string }
	if errors.As(err, &ae) && ae.ErrorCode() == "ThrottlingException" {
		return fmt.Errorf("%w: %w", model.ErrRetryable, err)
	}
	var rnf *types.ResourceNotFoundException
	if errors.As(err, &rnf) {
		return fmt.Errorf("%w: %w", model.ErrNotFound, err)
	}
	return err
}
