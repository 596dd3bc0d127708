variable "region" {
  description = "AWS region to deploy into."
  type        = string

  validation {
    condition     = can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]$", var.region))
    error_message = "region must look like an AWS region, e.g. ap-southeast-2."
  }
}

variable "environment" {
  description = "Environment name; names every resource commitcollect-<environment>-* and prefixes the tables with <environment>-."
  type        = string
}

variable "artifacts_dir" {
  description = "Folder holding api.zip, worker.zip, projector.zip and sweeper.zip, relative to this folder (an absolute path would put the checkout's location in state). Null means dist/ at the repository root."
  type        = string
  default     = null
}

variable "strava" {
  description = "Strava API application: client id, SSM SecureString parameter ARNs of the client secret and verify token, the webhook callback's secret path segment (and the previous one while a new callback is registered), and the push subscription id once it exists."
  type = object({
    client_id                      = string
    client_secret_param_arn        = string
    verify_token_param_arn         = string
    callback_path_segment          = string
    previous_callback_path_segment = optional(string)
    subscription_id                = optional(number)
    base_url                       = optional(string, "https://www.strava.com")
  })
}

variable "secrets_kms_key_arn" {
  description = "Customer managed KMS key of the SecureString parameters, or null for the AWS managed aws/ssm key."
  type        = string
  default     = null
}

variable "token_kms_key_arn" {
  description = "KMS key sealing Strava tokens, or null to let the module create one (with rotation)."
  type        = string
  default     = null
}

variable "table_kms_key_arn" {
  description = "Customer managed KMS key of the four tables, or null for the AWS managed aws/dynamodb key. The functions get kms:Decrypt on it through DynamoDB only."
  type        = string
  default     = null
}

variable "alarm_topic_arn" {
  description = "SNS topic that receives every alarm (owned by the platform team)."
  type        = string
}

variable "public_url" {
  description = "Public base URL (custom domain) of the API, or null for the execute-api endpoint."
  type        = string
  default     = null
}

variable "cors_origins" {
  description = "Origins allowed by CORS; empty disables CORS."
  type        = list(string)
  default     = []
}

variable "log_level" {
  description = "Log level of every function: debug, info, warn or error."
  type        = string
  default     = "info"
}

variable "deletion_protection" {
  description = "DynamoDB deletion protection on the four tables."
  type        = bool
  default     = true
}

variable "projector" {
  description = "Projector stream mapping: batch size, batching window (s), bounded retries and record age (s)."
  type = object({
    batch_size             = optional(number, 100)
    batching_window_s      = optional(number, 1)
    maximum_retry_attempts = optional(number, 10)
    maximum_record_age_s   = optional(number, 82800) # below the stream's 24 h
  })
  default = {}
}
