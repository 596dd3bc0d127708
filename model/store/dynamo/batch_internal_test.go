package dynamo

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/commitcollect/backend/model"
)

// TestResendUnprocessedSendsUntilNothingIsLeft: what DynamoDB leaves
// unprocessed is sent again until nothing is left; a failed call stops the
// resends and is read as a model error; a cancelled wait stops them too.
func TestResendUnprocessedSendsUntilNothingIsLeft(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name      string
		ctx       context.Context
		left      []int // what each send leaves
		fail      error // the send's error after the lefts
		wantSends int
		wantErr   error
	}{
		{"all at once", context.Background(), []int{0}, nil, 1, nil},
		{"two resends", context.Background(), []int{5, 2, 0}, nil, 3, nil},
		{"a failed call", context.Background(), []int{3}, &types.ConditionalCheckFailedException{}, 2, model.ErrConflict},
		{"cancelled before a resend", cancelled, []int{3, 0}, nil, 1, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sends := 0
			err := resendUnprocessed(tc.ctx, func() (int, error) {
				sends++
				if sends > len(tc.left) {
					return 0, tc.fail
				}
				return tc.left[sends-1], nil
			})
			if sends != tc.wantSends || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("%d sends, %v; want %d sends, %v", sends, err, tc.wantSends, tc.wantErr)
			}
		})
	}
}
