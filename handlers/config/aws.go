package config

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
)

// Instrument, when set, is applied to every AWS configuration the process
// loads (Config.AWS, and Load's SSM reads): test/terraform's IAM test sets it
// to record the calls (test/awsrecord). Nil in everything that ships.
var Instrument func(*aws.Config) error

func instrument(cfg *aws.Config) error {
	if Instrument == nil {
		return nil
	}
	return Instrument(cfg)
}

// AWS loads the default credential chain (with the SDK's standard retryer).
// The SDK logs through c.Logger (SDKLogger), so its warnings are JSON too.
// Instrument, when set, is applied to it (tests record the calls).
// With DYNAMODB_ENDPOINT set and no credentials configured, it uses dummy
// static credentials, which is all DynamoDB Local needs.
func (c Config) AWS(ctx context.Context) (aws.Config, error) {
	opts := []func(*awsconfig.LoadOptions) error{awsconfig.WithLogger(SDKLogger(c.Logger()))}
	if c.DynamoDBEndpoint != "" {
		// A DynamoDB-compatible endpoint (DynamoDB Local) is not on EC2:
		// asking the instance metadata service for credentials only costs
		// seconds of timeouts.
		opts = append(opts, awsconfig.WithRegion("ap-southeast-2"),
			awsconfig.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load aws config: %w", err)
	}
	if c.DynamoDBEndpoint != "" {
		if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
			cfg.Credentials = credentials.NewStaticCredentialsProvider("local", "local", "")
		}
	}
	if err := instrument(&cfg); err != nil {
		return aws.Config{}, err
	}
	return cfg, nil
}

// DynamoDB builds the DynamoDB and DynamoDB Streams clients, pointed at
// DYNAMODB_ENDPOINT when set. Against such an endpoint (DynamoDB Local) the
// client does not validate DynamoDB's x-amz-crc32 response checksum: DynamoDB
// Local's does not match its bodies, and every call logged a warning when the
// body was closed (thousands per scale run); AWS's endpoint keeps the check.
func (c Config) DynamoDB(cfg aws.Config) (*dynamodb.Client, *dynamodbstreams.Client) {
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if c.DynamoDBEndpoint != "" {
			o.BaseEndpoint = aws.String(c.DynamoDBEndpoint)
			o.DisableValidateResponseChecksum = true
		}
	})
	st := dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) {
		if c.DynamoDBEndpoint != "" {
			o.BaseEndpoint = aws.String(c.DynamoDBEndpoint)
		}
	})
	return db, st
}
