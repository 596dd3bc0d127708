package tfdeploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/commitcollect/backend/model/catalog"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/store/dynamo"
)

// Target is where a deployed environment keeps its data, read from the
// Terraform outputs after apply: the four table names and the region (taken
// from the main table's stream ARN, so it is the region Terraform deployed
// to, whatever the operator's AWS profile says).
type Target struct {
	Tables dynamo.Tables
	Region string
}

// TargetFromOutputs reads table_names (main, sessions, audit, idempotency)
// and stream_arn. It returns an error naming what is missing.
func TargetFromOutputs(outs map[string]tfexec.OutputMeta) (Target, error) {
	var t Target
	var names map[string]string
	if o, ok := outs["table_names"]; !ok {
		return t, errors.New("terraform output table_names is missing")
	} else if err := json.Unmarshal(o.Value, &names); err != nil {
		return t, fmt.Errorf("terraform output table_names: %w", err)
	}
	t.Tables = dynamo.Tables{Main: names["main"], Sessions: names["sessions"], Audit: names["audit"], Idempotency: names["idempotency"]}
	if t.Tables.Main == "" {
		return t, errors.New("terraform output table_names has no main table")
	}
	var arn string
	if o, ok := outs["stream_arn"]; !ok {
		return t, errors.New("terraform output stream_arn is missing")
	} else if err := json.Unmarshal(o.Value, &arn); err != nil {
		return t, fmt.Errorf("terraform output stream_arn: %w", err)
	}
	// arn:aws:dynamodb:REGION:ACCOUNT:table/NAME/stream/LABEL
	if parts := strings.SplitN(arn, ":", 6); len(parts) == 6 && parts[3] != "" {
		t.Region = parts[3]
	} else {
		return t, fmt.Errorf("terraform output stream_arn %q is not a stream ARN", arn)
	}
	return t, nil
}

// SeedCatalog writes the embedded model catalog (model/catalog) into the
// main table: MODEL#{id}/META and PART#{nn} items. Nothing else creates them
// in AWS, and without them POST /v1/milestones refuses every model. It is
// idempotent (a re-run changes 0 items) and refuses to overwrite a catalog
// seeded by a newer version. It returns how many items it changed.
func SeedCatalog(ctx context.Context, db *dynamodb.Client, tables dynamo.Tables) (int, error) {
	cat, err := catalog.Default()
	if err != nil {
		return 0, fmt.Errorf("seed catalog: %w", err)
	}
	n, err := catalog.Seed(ctx, store.New(db, tables).Milestones, cat)
	if err != nil {
		return n, fmt.Errorf("seed catalog into %s: %w", tables.Main, err)
	}
	return n, nil
}
