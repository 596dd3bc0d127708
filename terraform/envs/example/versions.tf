terraform {
  required_version = ">= 1.5.0"

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
