variable "table_prefix" {
  description = "Prefix of the four table names, e.g. \"prod-\" gives prod-CommitCollect. Must match CC_TABLE_PREFIX of every function."
  type        = string
  default     = ""

  validation {
    condition     = can(regex("^[A-Za-z0-9_.-]{0,64}$", var.table_prefix))
    error_message = "table_prefix may hold letters, digits, '_', '-' and '.' only (at most 64 characters)."
  }
}

variable "deletion_protection" {
  description = "Turn on DynamoDB deletion protection for all four tables. Leave on outside throwaway environments."
  type        = bool
  default     = true
}

variable "kms_key_arn" {
  description = "Customer managed KMS key for server-side encryption. Null uses the AWS managed key (aws/dynamodb)."
  type        = string
  default     = null

  validation {
    condition     = var.kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:", var.kms_key_arn))
    error_message = "kms_key_arn must be a KMS key ARN or null."
  }
}

variable "tags" {
  description = "Tags added to every table."
  type        = map(string)
  default     = {}
}
