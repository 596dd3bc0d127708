# Example environment: a thin caller of modules/commitcollect. Copy this
# folder per environment, set the values in a .tfvars file and pass your own
# backend configuration (see README, section Deploy).

provider "aws" {
  region = var.region

  default_tags {
    tags = {
      Application = "CommitCollect"
      Environment = var.environment
      ManagedBy   = "terraform"
    }
  }
}

module "commitcollect" {
  source = "../../modules/commitcollect"

  environment         = var.environment
  artifacts_dir       = var.artifacts_dir != null ? var.artifacts_dir : "../../../dist"
  strava              = var.strava
  secrets_kms_key_arn = var.secrets_kms_key_arn
  token_kms_key_arn   = var.token_kms_key_arn
  public_url          = var.public_url
  cors_origins        = var.cors_origins
  log_level           = var.log_level
  tables              = { deletion_protection = var.deletion_protection, kms_key_arn = var.table_kms_key_arn }
  projector           = var.projector
  alarms              = { topic_arn = var.alarm_topic_arn }
}
