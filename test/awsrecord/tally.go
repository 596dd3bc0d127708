package awsrecord

import (
	"context"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// Tally counts every AWS call a process makes and the time its answers
// took, by call (Count names them), retries and refused calls included:
// what the endpoint serves, where the store's capacity meter sees only the
// store's own calls. Safe for concurrent use.
type Tally struct {
	mu    sync.Mutex
	calls map[string]Calls
}

// Calls is what a Tally holds for one call: its attempts, and the time
// they waited for their answers (concurrent attempts add up).
type Calls struct {
	N    int
	Wait time.Duration
}

// Count adds a middleware to cfg that counts each attempt of each call in t
// and the time it waited for the answer, by service, operation and table
// ("DynamoDB UpdateItem Main"; a transaction is named by its first item's).
func (t *Tally) Count(cfg *aws.Config) {
	cfg.APIOptions = append(cfg.APIOptions, func(stack *middleware.Stack) error {
		err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("TallyAWSCallName",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				service, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
				name := service + " " + op
				if calls := describeCall(service, op, in.Parameters); len(calls) > 0 && calls[0].Table != "" {
					name += " " + trimPrefix(calls[0].Table)
				}
				return next.HandleInitialize(middleware.WithStackValue(ctx, tallyName{}, name), in)
			}), middleware.After)
		if err != nil {
			return err
		}
		return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("TallyAWSCalls",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				name, _ := middleware.GetStackValue(ctx, tallyName{}).(string)
				began := time.Now()
				out, md, err := next.HandleFinalize(ctx, in)
				took := time.Since(began)
				t.mu.Lock()
				if t.calls == nil {
					t.calls = map[string]Calls{}
				}
				c := t.calls[name]
				t.calls[name] = Calls{N: c.N + 1, Wait: c.Wait + took}
				t.mu.Unlock()
				return out, md, err
			}), middleware.After)
	})
}

// tallyName is the stack value that carries a call's name to its attempts.
type tallyName struct{}

// trimPrefix drops a test run's table prefix ("t1a2b3c4-Main" → "Main").
func trimPrefix(table string) string {
	if i := strings.LastIndexByte(table, '-'); i >= 0 {
		return table[i+1:]
	}
	return table
}

// Snapshot returns what the tally holds now, by call.
func (t *Tally) Snapshot() map[string]Calls {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.calls)
}
