package store

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/emf"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store/dynamo"
	"github.com/commitcollect/backend/model/store/dynerr"
)

// Audits holds the audit table: entries, and the count of those dropped.
type Audits struct {
	DB *dynamo.DB

	dropped atomic.Int64
}

// AppendAudit writes an audit entry. An entry with the same key (a replayed
// event) is written once.
func (s *Audits) AppendAudit(ctx context.Context, e *model.AuditEntry) error {
	err := s.DB.PutIfAbsent(ctx, s.DB.Tables().Audit, e)
	if err != nil && !isConflict(err) {
		return fmt.Errorf("append audit %s %s: %w", e.EventType, e.ItemKey(), err)
	}
	return nil
}

// Audit writes an audit entry and never fails: audit failures must not break
// business logic. A failed write (a throttled one included, once the SDK's
// retries are spent) is not lost silently: it is counted
// (AuditWritesDropped), logged at warn as LogAuditDropped with the entry's
// identity, and, when s.AuditMetrics is set, written as one CloudWatch
// Embedded Metric Format line (namespace AuditMetricsNamespace, metric
// MetricAuditWritesDropped, dimension TableName = the audit table) that the
// Terraform alarm audit_writes_dropped watches.
func (s *Audits) Audit(ctx context.Context, log *slog.Logger, e *model.AuditEntry) {
	err := s.AppendAudit(ctx, e)
	if err == nil {
		return
	}
	s.dropped.Add(1)
	log.WarnContext(ctx, LogAuditDropped, "eventType", e.EventType,
		"correlationId", e.CorrelationID, "userId", e.UserID, "error", err)
	if s.DB.AuditMetrics != nil {
		if werr := writeAuditDropped(s.DB.AuditMetrics, s.DB.Tables().Audit, s.DB.Now()); werr != nil {
			log.WarnContext(ctx, "audit drop metric not written", "error", werr)
		}
	}
}

// Audit-drop accounting (Store.Audit).
const (
	// AuditMetricsNamespace is the CloudWatch namespace of the store's
	// audit metric.
	AuditMetricsNamespace = "CommitCollect/Audit"
	// MetricAuditWritesDropped counts audit entries Store.Audit could not
	// write (throttled past the SDK's retries, or any other failure).
	MetricAuditWritesDropped = "AuditWritesDropped"
	// LogAuditDropped is the stable message of the warn line logged for
	// each dropped audit entry.
	LogAuditDropped = "audit write dropped"
)

// AuditWritesDropped returns how many audit entries this store dropped
// since it was built.
func (s *Audits) AuditWritesDropped() int64 { return s.dropped.Load() }

func writeAuditDropped(w io.Writer, table string, now time.Time) error {
	return emf.Write(w, AuditMetricsNamespace, now, "TableName", table, []emf.Value{{Name: MetricAuditWritesDropped, Unit: "Count", Value: 1}})
}

// AuditEntriesAt reads a user's audit entries keyed in the second of at
// (AUDIT#{unix seconds}#…): one strongly consistent Query. The projector
// uses it to find AWARD_MINTED entries written before their keys were
// deterministic, which were keyed at the second of the award's
// awardedAtUtc.
func (s *Audits) AuditEntriesAt(ctx context.Context, userID string, at time.Time) ([]model.AuditEntry, error) {
	es, _, err := dynamo.QueryEntities[model.AuditEntry](ctx, s.DB, s.DB.Tables().Audit, keys.UserPK(userID), keys.AuditSK(at, ""), dynamo.QueryOptions{})
	if err != nil {
		return nil, fmt.Errorf("read audit entries of user %s at %d: %w", userID, at.Unix(), err)
	}
	return es, nil
}

// ExpireUserAudit brings the TTL (expiresAt) of every audit entry of userID
// forward to at, where it lies later, except the ACCOUNT_DELETED entries,
// which hold no Strava id and keep theirs: an account deletion, after which
// nothing naming a Strava id outlives at. It returns how many entries it
// changed; re-running it is harmless.
func (s *Audits) ExpireUserAudit(ctx context.Context, userID string, at time.Time) (int, error) {
	exp := at.Unix()
	later := expression.Name("expiresAt").GreaterThan(expression.Value(exp)).
		And(expression.Name("eventType").NotEqual(expression.Value(model.AuditAccountDeleted)))
	ex, err := expression.NewBuilder().WithKeyCondition(expression.Key("PK").Equal(expression.Value(keys.UserPK(userID)))).
		WithFilter(later).WithProjection(expression.NamesList(expression.Name("PK"), expression.Name("SK"))).Build()
	if err != nil {
		return 0, fmt.Errorf("expire audit of user %s: build query: %w", userID, err)
	}
	p := dynamodb.NewQueryPaginator(s.DB.Client(), &dynamodb.QueryInput{TableName: aws.String(s.DB.Tables().Audit),
		KeyConditionExpression: ex.KeyCondition(), FilterExpression: ex.Filter(), ProjectionExpression: ex.Projection(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(), ConsistentRead: aws.Bool(true)})
	n := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return n, fmt.Errorf("expire audit of user %s: %w", userID, dynerr.Translate(err))
		}
		for _, it := range page.Items {
			k, err := dynamo.KeyOf(it)
			if err != nil {
				return n, err
			}
			upd := expression.Set(expression.Name("expiresAt"), expression.Value(exp))
			err = s.DB.UpdateIn(ctx, s.DB.Tables().Audit, k, upd, expression.AttributeExists(expression.Name("PK")))
			if err != nil && !isConflict(err) {
				return n, fmt.Errorf("expire audit of user %s: %w", userID, err)
			}
			n++
		}
	}
	return n, nil
}
