package deauth_test

import (
	"testing"

	"github.com/commitcollect/backend/test/dynamolocal"
)

// The wired tests run against DynamoDB Local (they skip with -short).
func TestMain(m *testing.M) { dynamolocal.Main(m) }
