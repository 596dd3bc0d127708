package app

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	awskms "github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/commitcollect/backend/handlers/config"
	"github.com/commitcollect/backend/model/secrets"
	"github.com/commitcollect/backend/model/secrets/kms"
	"github.com/commitcollect/backend/model/store"
)

// Conn is a process's way into AWS, built from its configuration: the SDK's
// configuration, the DynamoDB and DynamoDB Streams clients, and the store.
type Conn struct {
	AWS     aws.Config
	DB      *dynamodb.Client
	Streams *dynamodbstreams.Client
	Store   *store.Adapters
}

// Open loads cfg's AWS configuration (config.Config.AWS), builds the
// DynamoDB clients and the store over them with the token sealer cfg names:
// the one way every Lambda, the local stack and the operator commands reach
// their tables.
func Open(ctx context.Context, cfg config.Config) (*Conn, error) {
	awsCfg, err := cfg.AWS(ctx)
	if err != nil {
		return nil, err
	}
	db, sc := cfg.DynamoDB(awsCfg)
	st, err := StoreOf(cfg, db, awsCfg)
	if err != nil {
		return nil, err
	}
	return &Conn{AWS: awsCfg, DB: db, Streams: sc, Store: st}, nil
}

// StoreOf builds the store over db with the token sealer cfg names: data
// keys from KMS when CC_TOKEN_KMS_KEY is set, else from the local
// CC_TOKEN_KEY. With neither, the store has no sealer and refuses to write
// Strava tokens (store.ErrNoSealer).
func StoreOf(cfg config.Config, db *dynamodb.Client, awsCfg aws.Config) (*store.Adapters, error) {
	st := store.New(db, cfg.Tables())
	st.DB.OutboxShards = cfg.OutboxShards
	switch {
	case cfg.TokenKMSKey != "":
		st.DB.Secrets = secrets.NewSealer(kms.New(awskms.NewFromConfig(awsCfg), cfg.TokenKMSKey))
	case cfg.TokenKey != nil:
		p, err := secrets.NewLocalKeyProvider(cfg.TokenKey)
		if err != nil {
			return nil, fmt.Errorf("token key: %w", err)
		}
		st.DB.Secrets = secrets.NewSealer(p)
	}
	return st, nil
}
