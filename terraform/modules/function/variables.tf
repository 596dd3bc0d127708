variable "name" {
  description = "Function name, also the log group /aws/lambda/<name>."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,64}$", var.name))
    error_message = "name must be 1-64 letters, digits, '-' or '_'."
  }
}

variable "description" {
  description = "What the function does (shown in the console)."
  type        = string
  default     = ""
}

variable "zip_path" {
  description = "Path of the deployment zip holding the static linux/arm64 bootstrap (built by scripts/lambdabuild)."
  type        = string
}

variable "settings" {
  description = "Runtime settings: memory in MB, timeout in seconds, reserved concurrency (null = unreserved)."
  type = object({
    memory_mb            = optional(number, 256)
    timeout_s            = optional(number, 30)
    reserved_concurrency = optional(number)
  })
  default = {}

  validation {
    condition     = var.settings.memory_mb >= 128 && var.settings.memory_mb <= 10240
    error_message = "settings.memory_mb must be between 128 and 10240."
  }
  validation {
    condition     = var.settings.timeout_s >= 1 && var.settings.timeout_s <= 900
    error_message = "settings.timeout_s must be between 1 and 900."
  }
  validation {
    condition     = var.settings.reserved_concurrency == null || try(var.settings.reserved_concurrency >= 0, false)
    error_message = "settings.reserved_concurrency must be null or >= 0."
  }
}

variable "environment" {
  description = "Environment variables. Never put a secret here: pass an SSM parameter ARN in a *_PARAM variable instead."
  type        = map(string)
  default     = {}
}

variable "log_level" {
  description = "Application log level (debug, info, warn, error): CC_LOG_LEVEL for the code and Lambda's application_log_level, which drops lower levels."
  type        = string
  default     = "info"

  validation {
    condition     = contains(["debug", "info", "warn", "error"], var.log_level)
    error_message = "log_level must be debug, info, warn or error."
  }
}

variable "policy_json" {
  description = "The function's least-privilege policy (an aws_iam_policy_document's json). CloudWatch Logs access is added by this module."
  type        = string
}

variable "log_retention_days" {
  description = "Retention of the function's log group in days."
  type        = number
  default     = 30

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days must be a value CloudWatch Logs accepts (1, 3, 5, 7, 14, 30, 60, 90, ...)."
  }
}

variable "alarms" {
  description = "Errors and throttles alarms: SNS topic to notify and the evaluation period in seconds."
  type = object({
    topic_arn = string
    period_s  = optional(number, 300)
  })

  validation {
    condition     = can(regex("^arn:aws[a-z-]*:sns:", var.alarms.topic_arn))
    error_message = "alarms.topic_arn must be an SNS topic ARN."
  }
  validation {
    condition     = var.alarms.period_s >= 60 && var.alarms.period_s % 60 == 0
    error_message = "alarms.period_s must be a multiple of 60."
  }
}

variable "tags" {
  description = "Tags added to every resource of the function."
  type        = map(string)
  default     = {}
}
