terraform {
  # 1.11: the S3 backend's native locking (use_lockfile in backend.hcl.example)
  # is GA from 1.11; optional() defaults need 1.3.
  required_version = ">= 1.11.0"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 6.37.0, < 7.0.0"
    }
  }

  # Partial configuration: each platform engineer passes their own state
  # bucket, key, region and lock settings, e.g.
  #   go run ./scripts/deploy --env terraform/envs/example --backend-config=backend.hcl
  backend "s3" {}
}
