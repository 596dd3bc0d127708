package config

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// SecretSettings are the settings that hold secrets. In AWS each comes by
// reference: <NAME>_PARAM holds the name or ARN of an SSM Parameter Store
// SecureString (Terraform sets it), read once at cold start, so the secret is
// neither in Terraform state nor in a plain environment variable. Locally the
// plain <NAME> may be set instead.
var SecretSettings = []string{"STRAVA_CLIENT_SECRET", "STRAVA_VERIFY_TOKEN"}

// ParamSuffix marks a setting that holds a reference instead of the value.
const ParamSuffix = "_PARAM"

// ParamReader returns the decrypted value of one parameter (name or ARN).
type ParamReader func(ctx context.Context, nameOrARN string) (string, error)

// ResolveSecrets returns a getenv that answers every SecretSettings name
// whose <NAME>_PARAM is set with the value read through read, and passes
// everything else to getenv (os.Getenv when nil). read is called only for
// references that are set. It returns every problem together: a setting given
// both as a value and as a reference, a failed read (wrapped with the setting
// and the reference) or an empty parameter.
func ResolveSecrets(ctx context.Context, getenv func(string) string, read ParamReader) (func(string) string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	resolved := map[string]string{}
	var errs []error
	for _, name := range SecretSettings {
		ref := getenv(name + ParamSuffix)
		if ref == "" {
			continue
		}
		if getenv(name) != "" {
			errs = append(errs, fmt.Errorf("%s and %s%s are both set: keep only the reference", name, name, ParamSuffix))
			continue
		}
		if read == nil {
			errs = append(errs, fmt.Errorf("%s%s is set but no parameter reader is configured", name, ParamSuffix))
			continue
		}
		v, err := read(ctx, ref)
		if err != nil {
			errs = append(errs, fmt.Errorf("read %s from %s: %w", name, ref, err))
			continue
		}
		if v == "" {
			errs = append(errs, fmt.Errorf("read %s from %s: parameter is empty", name, ref))
			continue
		}
		resolved[name] = v
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("secrets:\n%w", err)
	}
	return func(k string) string {
		if v, ok := resolved[k]; ok {
			return v
		}
		return getenv(k)
	}, nil
}

// HasSecretRefs reports whether any <NAME>_PARAM reference is set.
func HasSecretRefs(getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	for _, name := range SecretSettings {
		if getenv(name+ParamSuffix) != "" {
			return true
		}
	}
	return false
}

// SSMGetParameter is the one SSM call ResolveSecrets needs (*ssm.Client).
type SSMGetParameter interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, opts ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

var _ SSMGetParameter = (*ssm.Client)(nil)

// SSMReader reads SecureString parameters with decryption. Its errors are
// the SDK's (after the SDK's own retries), e.g. ParameterNotFound or
// AccessDenied.
func SSMReader(client SSMGetParameter) ParamReader {
	return func(ctx context.Context, nameOrARN string) (string, error) {
		out, err := client.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(nameOrARN), WithDecryption: aws.Bool(true)})
		if err != nil {
			return "", err
		}
		if out.Parameter == nil || out.Parameter.Value == nil {
			return "", fmt.Errorf("parameter %s has no value", nameOrARN)
		}
		return *out.Parameter.Value, nil
	}
}

// Load reads the process configuration like FromEnv(os.Getenv, need) after
// resolving secret references through SSM; the AWS configuration is loaded
// only when a reference is set. Lambda mains call it once at cold start. It
// returns every configuration problem together, and the secret-resolution
// errors (see ResolveSecrets) before validation.
func Load(ctx context.Context, need Need) (Config, error) {
	getenv := os.Getenv
	if HasSecretRefs(getenv) {
		cfg, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return Config{}, fmt.Errorf("load aws config for secrets: %w", err)
		}
		if err := instrument(&cfg); err != nil {
			return Config{}, err
		}
		if getenv, err = ResolveSecrets(ctx, getenv, SSMReader(ssm.NewFromConfig(cfg))); err != nil {
			return Config{}, err
		}
	}
	return FromEnv(getenv, need)
}
