package awsrecord

import (
	"context"
	"maps"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// Tally counts every AWS call a process makes, by service and operation
// ("DynamoDB Streams GetRecords"), retries and refused calls included: what
// the endpoint serves, where the store's capacity meter sees only the
// store's own calls. Install it with Count. Safe for concurrent use.
type Tally struct {
	mu     sync.Mutex
	counts map[string]int
}

// Count adds a middleware to cfg that counts each attempt of each call in t.
func (t *Tally) Count(cfg *aws.Config) {
	cfg.APIOptions = append(cfg.APIOptions, func(stack *middleware.Stack) error {
		return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("TallyAWSCalls",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				name := awsmiddleware.GetServiceID(ctx) + " " + awsmiddleware.GetOperationName(ctx)
				t.mu.Lock()
				if t.counts == nil {
					t.counts = map[string]int{}
				}
				t.counts[name]++
				t.mu.Unlock()
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	})
}

// Snapshot returns the counts so far.
func (t *Tally) Snapshot() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.counts)
}
