variable "environment" {
  description = "Environment name (e.g. prod, staging). Names every resource commitcollect-<environment>-*."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,19}$", var.environment))
    error_message = "environment must start with a lowercase letter and hold at most 20 lowercase letters, digits or '-'."
  }
}

variable "table_prefix" {
  description = "Prefix of the four DynamoDB table names (CC_TABLE_PREFIX). Null means \"<environment>-\"; \"\" means the bare seed names."
  type        = string
  default     = null
}

variable "artifacts_dir" {
  description = "Folder holding api.zip, worker.zip and projector.zip (built by `make build` / scripts/deploy)."
  type        = string
}

variable "strava" {
  description = <<-EOT
    Strava API application. Secrets come by reference only: the ARNs of SSM
    Parameter Store SecureString parameters created outside Terraform, read by
    the functions at cold start (STRAVA_*_PARAM), so no secret lands in state
    or in plain environment variables. subscription_id stays null until the
    push subscription exists (scripts/deploy prints the command to create it).
    callback_path_segment is the webhook callback's last path segment
    (webhook_callback_url, on the webhook's own API, webhook.tf), checked by
    the api Lambda and never in a route key, a log or an alarm. It is not a
    credential (every event is confirmed at Strava before it is written);
    choose 16 to 128 random letters, digits, '-' or '_' (e.g. `openssl rand
    -hex 16`). previous_callback_path_segment is served too while a new
    callback is registered (the rotation is in webhook.tf).
  EOT
  type = object({
    client_id                      = string
    client_secret_param_arn        = string
    verify_token_param_arn         = string
    callback_path_segment          = string
    previous_callback_path_segment = optional(string)
    subscription_id                = optional(number)
    base_url                       = optional(string, "https://www.strava.com")
  })

  validation {
    condition     = can(regex("^[0-9]+$", var.strava.client_id))
    error_message = "strava.client_id must be the numeric client id of the Strava API application."
  }
  validation {
    condition = alltrue([for arn in [var.strava.client_secret_param_arn, var.strava.verify_token_param_arn] :
    can(regex("^arn:aws[a-z-]*:ssm:[a-z0-9-]+:[0-9]{12}:parameter/.+$", arn))])
    error_message = "strava.client_secret_param_arn and strava.verify_token_param_arn must be SSM parameter ARNs."
  }
  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{16,128}$", var.strava.callback_path_segment))
    error_message = "strava.callback_path_segment must be 16 to 128 letters, digits, '-' or '_'."
  }
  validation {
    condition = var.strava.previous_callback_path_segment == null || (can(regex("^[A-Za-z0-9_-]{16,128}$", coalesce(var.strava.previous_callback_path_segment, "-")))
    && var.strava.previous_callback_path_segment != var.strava.callback_path_segment)
    error_message = "strava.previous_callback_path_segment must be 16 to 128 letters, digits, '-' or '_', and not the current segment."
  }
  validation {
    condition     = var.strava.subscription_id == null || try(var.strava.subscription_id > 0, false)
    error_message = "strava.subscription_id must be null or a positive integer."
  }
  validation {
    condition     = can(regex("^https?://[^/]+", var.strava.base_url))
    error_message = "strava.base_url must be an absolute http(s) URL."
  }
}

variable "secrets_kms_key_arn" {
  description = "Customer managed KMS key of the SecureString parameters. Null when they use the AWS managed aws/ssm key (no kms grant needed)."
  type        = string
  default     = null

  validation {
    condition     = var.secrets_kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:", var.secrets_kms_key_arn))
    error_message = "secrets_kms_key_arn must be a KMS key ARN or null."
  }
}

variable "token_kms_key_arn" {
  description = "KMS key that wraps the data keys sealing Strava tokens (CC_TOKEN_KMS_KEY). Null creates one with yearly rotation."
  type        = string
  default     = null

  validation {
    condition     = var.token_kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/.+$", var.token_kms_key_arn))
    error_message = "token_kms_key_arn must be a KMS key ARN or null."
  }
}

variable "public_url" {
  description = "Public base URL of the API (CC_PUBLIC_URL), e.g. a custom domain. Null uses the HTTP API's execute-api endpoint."
  type        = string
  default     = null

  validation {
    condition     = var.public_url == null || can(regex("^https://[^/]+", var.public_url))
    error_message = "public_url must be an https URL or null."
  }
}

variable "cors_origins" {
  description = "Origins the api answers CORS for (CC_CORS_ORIGINS). Empty disables CORS."
  type        = list(string)
  default     = []
}

variable "log_level" {
  description = "Log level of every function (CC_LOG_LEVEL)."
  type        = string
  default     = "info"

  validation {
    condition     = contains(["debug", "info", "warn", "error"], var.log_level)
    error_message = "log_level must be debug, info, warn or error."
  }
}

variable "log_retention_days" {
  description = "Retention of the functions' and the API's log groups in days."
  type        = number
  default     = 30
}

variable "tables" {
  description = "Table settings: deletion protection (on by default) and an optional customer managed KMS key."
  type = object({
    deletion_protection = optional(bool, true)
    kms_key_arn         = optional(string)
  })
  default = {}
}

variable "functions" {
  description = <<-EOT
    Memory (MB), timeout (s) and reserved concurrency per function. The worker's is reserved
    (25 by default) so a flood of events cannot take the account's Lambda concurrency from the
    api and the projector: Strava's read budget (600 per 15 minutes) keeps far fewer busy, and
    an asynchronous invoke past the limit waits in Lambda's queue (and the outbox) instead.
  EOT
  type = object({
    api       = optional(object({ memory_mb = optional(number, 256), timeout_s = optional(number, 10), reserved_concurrency = optional(number) }), {})
    worker    = optional(object({ memory_mb = optional(number, 256), timeout_s = optional(number, 60), reserved_concurrency = optional(number, 25) }), {})
    projector = optional(object({ memory_mb = optional(number, 512), timeout_s = optional(number, 120), reserved_concurrency = optional(number) }), {})
    sweeper   = optional(object({ memory_mb = optional(number, 128), timeout_s = optional(number, 60), reserved_concurrency = optional(number, 1) }), {})
  })
  default = {}
}

variable "worker" {
  description = <<-EOT
    Asynchronous invocation of the worker: retries and maximum event age before
    the event goes to the worker DLQ; and the cap on Strava reads one athlete's
    events may cause per 15-minute window and per UTC day (0 disables each).
  EOT
  type = object({
    maximum_retry_attempts   = optional(number, 2)
    maximum_event_age_s      = optional(number, 3600)
    athlete_reads_per_window = optional(number, 30)
    athlete_reads_per_day    = optional(number, 100)
  })
  default = {}

  validation {
    condition     = var.worker.athlete_reads_per_window >= 0 && floor(var.worker.athlete_reads_per_window) == var.worker.athlete_reads_per_window
    error_message = "worker.athlete_reads_per_window must be a non-negative integer."
  }
  validation {
    condition     = var.worker.athlete_reads_per_day >= 0 && floor(var.worker.athlete_reads_per_day) == var.worker.athlete_reads_per_day
    error_message = "worker.athlete_reads_per_day must be a non-negative integer."
  }

  validation {
    condition     = var.worker.maximum_retry_attempts >= 0 && var.worker.maximum_retry_attempts <= 2
    error_message = "worker.maximum_retry_attempts must be 0, 1 or 2."
  }
  validation {
    condition     = var.worker.maximum_event_age_s >= 60 && var.worker.maximum_event_age_s <= 21600
    error_message = "worker.maximum_event_age_s must be between 60 and 21600."
  }
}

variable "projector" {
  description = <<-EOT
    The projector's event source mapping on the main table's stream. Retries and
    record age are always bounded (never -1 = infinite) so one poison record
    cannot hold a shard; failed records go to the projector DLQ.
  EOT
  type = object({
    batch_size             = optional(number, 100)
    batching_window_s      = optional(number, 1)
    maximum_retry_attempts = optional(number, 10)
    maximum_record_age_s   = optional(number, 82800)
    parallelization_factor = optional(number, 1)
    starting_position      = optional(string, "TRIM_HORIZON")
  })
  default = {}

  validation {
    condition     = var.projector.batch_size >= 1 && var.projector.batch_size <= 10000
    error_message = "projector.batch_size must be between 1 and 10000."
  }
  validation {
    condition     = var.projector.batching_window_s >= 0 && var.projector.batching_window_s <= 300
    error_message = "projector.batching_window_s must be between 0 and 300."
  }
  validation {
    condition     = var.projector.maximum_retry_attempts >= 0 && var.projector.maximum_retry_attempts <= 10000
    error_message = "projector.maximum_retry_attempts must be between 0 and 10000 (never -1: retries must be bounded)."
  }
  validation {
    condition     = var.projector.maximum_record_age_s >= 60 && var.projector.maximum_record_age_s < 86400
    error_message = "projector.maximum_record_age_s must be between 60 and 86399: bounded (never -1) and below the stream's 24 h retention, so a range parked in the DLQ can still be re-read."
  }
  validation {
    condition     = var.projector.parallelization_factor >= 1 && var.projector.parallelization_factor <= 10
    error_message = "projector.parallelization_factor must be between 1 and 10."
  }
  validation {
    condition     = contains(["TRIM_HORIZON", "LATEST"], var.projector.starting_position)
    error_message = "projector.starting_position must be TRIM_HORIZON or LATEST."
  }
}

variable "sweeper" {
  description = <<-EOT
    The outbox sweeper: how often it runs (an EventBridge schedule expression),
    the lease a hand-off of an accepted webhook event holds before the sweeper
    dispatches it again (a Go duration, longer than the worker's timeout), and
    the backlog alarm: due outbox items per sweep at or above which, for three
    periods in a row, the alarm fires, and how many partitions the outbox's
    pending index spreads items over (CC_OUTBOX_SHARDS; one Query per shard
    per sweep; raise it freely, lower it only with an empty backlog).
  EOT
  type = object({
    schedule         = optional(string, "rate(1 minute)")
    lease            = optional(string, "5m")
    backlog_alarm_at = optional(number, 100)
    outbox_shards    = optional(number, 32)
  })
  default = {}

  validation {
    condition     = can(regex("^(rate|cron)\\(", var.sweeper.schedule))
    error_message = "sweeper.schedule must be a rate(...) or cron(...) expression."
  }
  validation {
    condition     = can(regex("^[0-9]+(s|m|h)$", var.sweeper.lease))
    error_message = "sweeper.lease must be a duration like 300s, 5m or 1h."
  }
  validation {
    condition     = var.sweeper.outbox_shards >= 1 && var.sweeper.outbox_shards <= 256 && floor(var.sweeper.outbox_shards) == var.sweeper.outbox_shards
    error_message = "sweeper.outbox_shards must be an integer in 1..256."
  }
  validation {
    condition     = var.sweeper.backlog_alarm_at > 0
    error_message = "sweeper.backlog_alarm_at must be positive."
  }
}

variable "reconcile" {
  description = <<-EOT
    Reconciliation of edits Strava never pushes (distance, time, crops): each
    athlete has a slot every interval_hours (an EventBridge schedule steps the
    sweeper's resumable enumeration every minute); at its slot an athlete with
    an active milestone overlapping the last `days` days is reconciled when it
    uploaded since its last reconciliation, or when that one is idle_hours
    old: one job re-lists the last `days` days (after=) and writes only the
    workouts that differ. Bound: an unpushed edit to such an activity is
    caught within interval_hours (plus one rate window) when the athlete
    uploaded anything meanwhile, else within idle_hours while the activity is
    inside the window. CC_RECONCILE_INTERVAL, CC_RECONCILE_IDLE and
    CC_RECONCILE_DAYS of the sweeper and worker.
  EOT
  type = object({
    interval_hours = optional(number, 168)
    idle_hours     = optional(number, 672)
    days           = optional(number, 14)
  })
  default = {}

  validation {
    condition     = var.reconcile.interval_hours >= 1 && var.reconcile.interval_hours <= 720 && floor(var.reconcile.interval_hours) == var.reconcile.interval_hours
    error_message = "reconcile.interval_hours must be a whole number of hours between 1 and 720."
  }
  validation {
    condition     = var.reconcile.idle_hours >= var.reconcile.interval_hours && var.reconcile.idle_hours <= 2160 && floor(var.reconcile.idle_hours) == var.reconcile.idle_hours
    error_message = "reconcile.idle_hours must be a whole number of hours, at least interval_hours and at most 2160."
  }
  validation {
    condition     = var.reconcile.days >= 1 && var.reconcile.days <= 90 && floor(var.reconcile.days) == var.reconcile.days
    error_message = "reconcile.days must be a whole number of days between 1 and 90."
  }
}

variable "backfill" {
  description = <<-EOT
    Import of an athlete's Strava history on the first connect and when a
    milestone starts before what was imported: max_days bounds how far back
    (CC_SYNC_MAX_DAYS of the api, which enqueues it); budget_share is the
    share of each Strava budget window backfill and reconciliation jobs may
    spend before deferring to its reset, webhooks keeping the rest
    (CC_SYNC_BUDGET_SHARE of the worker).
  EOT
  type = object({
    max_days     = optional(number, 365)
    budget_share = optional(number, 0.5)
  })
  default = {}

  validation {
    condition     = var.backfill.max_days >= 1 && var.backfill.max_days <= 3650 && floor(var.backfill.max_days) == var.backfill.max_days
    error_message = "backfill.max_days must be a whole number of days between 1 and 3650."
  }
  validation {
    condition     = var.backfill.budget_share > 0 && var.backfill.budget_share <= 1
    error_message = "backfill.budget_share must be in (0, 1]."
  }
}

variable "api" {
  description = <<-EOT
    HTTP API throttling, per route: steady requests per second and burst (the token bucket's
    size). throttling_* is the stage default, which the BFF's /v1 routes get; webhook_* is the
    budget of the webhook's own API (webhook.tf), so a flood on the public API, the bare
    /webhooks/strava included (it gets auth_*), never throttles Strava's deliveries;
    auth_* is the /auth/* routes' (unauthenticated; the login writes an item per request).
    The webhook's is sized for Strava's bursts at a million athletes: `make capacity
    ARGS="-athletes 1000000"` models ~52 webhooks/s at an evening peak of 10x the mean, and
    the estimate was ~130/s with a heavier mix; Strava also redelivers in bursts after an
    outage of ours (every event up to 3 times). A throttled webhook is a 429 Strava retries, so
    the limit must sit well above the peak: 500/s is ~4x the issue's estimate and ~10x the
    model's, and a burst of 1000 absorbs two seconds of a backlog flush. It stays a guard, not a
    target: at ~30 ms per request 500/s is ~15 concurrent api Lambdas, far below the account's
    concurrency. Lower it for small deployments only together with the capacity plan.
  EOT
  type = object({
    throttling_rate_limit  = optional(number, 100)
    throttling_burst_limit = optional(number, 200)
    webhook_rate_limit     = optional(number, 500)
    webhook_burst_limit    = optional(number, 1000)
    auth_rate_limit        = optional(number, 20)
    auth_burst_limit       = optional(number, 40)
  })
  default = {}

  validation {
    condition = alltrue([for p in [[var.api.webhook_rate_limit, var.api.webhook_burst_limit], [var.api.auth_rate_limit, var.api.auth_burst_limit]] :
    p[0] > 0 && p[1] >= p[0]])
    error_message = "api webhook and auth limits must be positive, each burst at least its rate."
  }

  validation {
    condition     = var.api.throttling_rate_limit > 0 && var.api.throttling_burst_limit > 0
    error_message = "api throttling limits must be positive."
  }
  validation {
    condition     = var.api.throttling_burst_limit >= var.api.throttling_rate_limit
    error_message = "api.throttling_burst_limit must be at least api.throttling_rate_limit (the bucket holds at least one second)."
  }
}

variable "alarms" {
  description = "Where alarms go (an SNS topic the platform team owns), the evaluation period, the stream iterator age threshold and the API latency threshold (ms)."
  type = object({
    topic_arn       = string
    period_s        = optional(number, 300)
    iterator_age_ms = optional(number, 60000)
    api_latency_ms  = optional(number, 2000)
    # The largest share (percent) of Strava's read window one athlete may
    # take before the AthleteReadShare alarm fires.
    athlete_read_share_pct = optional(number, 20)
    # 4xx answers per period: the whole API's (401s without a session and
    # refused bodies are normal in small numbers), and the webhook route's
    # (Strava's deliveries throttled or refused).
    api_4xx     = optional(number, 500)
    webhook_4xx = optional(number, 10)
  })

  validation {
    condition     = can(regex("^arn:aws[a-z-]*:sns:", var.alarms.topic_arn))
    error_message = "alarms.topic_arn must be an SNS topic ARN."
  }
  validation {
    condition     = var.alarms.athlete_read_share_pct > 0 && var.alarms.athlete_read_share_pct <= 100
    error_message = "alarms.athlete_read_share_pct must be in (0, 100]."
  }
  validation {
    condition     = var.alarms.iterator_age_ms > 0
    error_message = "alarms.iterator_age_ms must be positive."
  }
}

variable "token_key_admin_arns" {
  description = "Principals that administer the token KMS key created here (never use it). Null: the account root, so IAM principals the account lets administer KMS."
  type        = list(string)
  default     = null
}

variable "tags" {
  description = "Tags added to every resource."
  type        = map(string)
  default     = {}
}
