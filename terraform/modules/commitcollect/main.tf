# CommitCollect in one AWS account and region: the four tables, the api,
# worker, projector and sweeper Lambdas with least-privilege roles, the HTTP
# API, the worker's async-invoke DLQ, the sweeper's schedule, the projector's
# stream mapping and its DLQ, and the alarms. test/terraform checks the invariants of this file.

locals {
  name         = "commitcollect-${var.environment}"
  table_prefix = var.table_prefix != null ? var.table_prefix : "${var.environment}-"
  public_url   = var.public_url != null ? trimsuffix(var.public_url, "/") : aws_apigatewayv2_api.http.api_endpoint

  # Every route the api Lambda serves (API Gateway HTTP API, payload v2).
  routes = [
    "GET /",
    "GET /webhooks/strava",
    "POST /webhooks/strava",
    "GET /auth/strava/login",
    "GET /auth/strava/callback",
    "POST /auth/logout",
    "GET /v1/me",
    "DELETE /v1/me",
    "GET /v1/me/export",
    "GET /v1/models",
    "GET /v1/milestones",
    "POST /v1/milestones",
    "GET /v1/milestones/{milestoneId}",
    "DELETE /v1/milestones/{milestoneId}",
    "GET /v1/milestones/{milestoneId}/workouts",
    "GET /v1/milestones/{milestoneId}/periods",
    "GET /v1/milestones/{milestoneId}/timeline",
    "GET /v1/awards",
    "GET /v1/collection",
  ]

  # CC_LOG_LEVEL is set by modules/function from log_level (with Lambda's
  # application_log_level).
  common_env = {
    CC_TABLE_PREFIX = local.table_prefix
    # The outbox's pending-index shards: the api's claim, the worker's
    # deferrals and the sweeper's leases and queries must agree.
    CC_OUTBOX_SHARDS = tostring(var.sweeper.outbox_shards)
  }
  # The KMS key sealing Strava tokens (model/secrets/kms): the caller's, or
  # the one this module creates.
  token_kms_key_arn = var.token_kms_key_arn != null ? var.token_kms_key_arn : aws_kms_key.tokens[0].arn
  tokens_env        = { CC_TOKEN_KMS_KEY = local.token_kms_key_arn }

  # kms:ViaService values: a customer managed key is only usable through the
  # service that owns the data (DynamoDB for the tables, SSM for the secrets).
  via_dynamodb = "dynamodb.${data.aws_region.current.region}.amazonaws.com"
  via_ssm      = "ssm.${data.aws_region.current.region}.amazonaws.com"
  # The tables' customer managed key, as a zero-or-one list for dynamic blocks.
  table_keys  = var.tables.kms_key_arn == null ? [] : [var.tables.kms_key_arn]
  secret_keys = var.secrets_kms_key_arn == null ? [] : [var.secrets_kms_key_arn]
  # The outbox lease: the api's claim and the sweeper's re-dispatch use the same.
  outbox_env = {
    CC_OUTBOX_LEASE = var.sweeper.lease
  }
  # Reconciliation: the window it re-lists, each athlete's slot period (one
  # enumeration cycle; the schedule below steps it every minute) and the
  # slow round-robin for athletes without an upload.
  reconcile_env = {
    CC_RECONCILE_DAYS     = tostring(var.reconcile.days)
    CC_RECONCILE_INTERVAL = "${var.reconcile.interval_hours}h"
    CC_RECONCILE_IDLE     = "${var.reconcile.idle_hours}h"
  }
  strava_env = {
    STRAVA_BASE_URL            = var.strava.base_url
    STRAVA_CLIENT_ID           = var.strava.client_id
    STRAVA_CLIENT_SECRET_PARAM = var.strava.client_secret_param_arn
  }
}

data "aws_region" "current" {}

module "tables" {
  source = "../tables"

  table_prefix        = local.table_prefix
  deletion_protection = var.tables.deletion_protection
  kms_key_arn         = var.tables.kms_key_arn
  tags                = var.tags
}

# ---------------------------------------------------------------- queues

resource "aws_sqs_queue" "worker_dlq" {
  name                      = "${local.name}-worker-dlq"
  message_retention_seconds = 1209600 # 14 days, the maximum: time to redrive
  sqs_managed_sse_enabled   = true
  tags                      = var.tags
}

resource "aws_sqs_queue" "projector_dlq" {
  name                      = "${local.name}-projector-dlq"
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = true
  tags                      = var.tags
}

# ---------------------------------------------------------- token key

# Strava tokens are sealed at the item level with envelope encryption: data
# keys from this key (GenerateDataKey), bound to the user and the purpose by
# the encryption context. Created here unless var.token_kms_key_arn names one.
#
# Protected like a table: only the api and worker roles may use the key, and
# only with the tokens' encryption context; the account's administrators
# (token_key_admin_arns, default the account root, meaning IAM principals
# the account lets administer KMS) manage it but cannot use it. The policy
# does not delegate use to IAM, so a broad kms:Decrypt grant elsewhere in the
# account opens no token. scripts/deploy refuses a plan that destroys or
# replaces the key unless --allow-destroy.
resource "aws_kms_key" "tokens" {
  count = var.token_kms_key_arn == null ? 1 : 0

  description             = "${local.name}: wraps the data keys sealing Strava tokens"
  enable_key_rotation     = true
  deletion_window_in_days = 30
  policy                  = data.aws_iam_policy_document.token_key.json
  tags                    = var.tags
}

resource "aws_kms_alias" "tokens" {
  count = var.token_kms_key_arn == null ? 1 : 0

  name          = "alias/${local.name}-tokens"
  target_key_id = aws_kms_key.tokens[0].key_id
}

# ------------------------------------------------------- least privilege

# The token key's use, in the api's and the worker's IAM policies and in the
# key's own policy alike: only with an encryption context of exactly
# {purpose = strava-tokens, userId = …}, and with no AWS service acting for
# the role (the functions call KMS directly, so their requests carry no
# kms:ViaService; a StringEquals on it would deny every call).
locals {
  token_key_conditions = [
    { test = "StringEquals", variable = "kms:EncryptionContext:purpose", values = ["strava-tokens"] },
    { test = "Null", variable = "kms:EncryptionContext:userId", values = ["false"] },
    { test = "ForAllValues:StringEquals", variable = "kms:EncryptionContextKeys", values = ["purpose", "userId"] },
    { test = "Null", variable = "kms:ViaService", values = ["true"] },
  ]
}

# api: the webhook's outbox claim (one conditional UpdateItem on
# Idempotency), sessions (account deletion removes them in batches), the BFF
# reads and writes and account deletion on the main table, audit, and the
# async hand-off to the worker. TransactWriteItems is authorised per item. No
# Scan. Every grant here is a call the code makes: test/terraform/iam_test.go
# records the calls and fails on a missing or an unused grant.
data "aws_iam_policy_document" "api" {
  statement {
    sid       = "OutboxClaim"
    actions   = ["dynamodb:UpdateItem"]
    resources = [module.tables.arns["idempotency"]]
  }
  statement {
    sid       = "Sessions"
    actions   = ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"]
    resources = [module.tables.arns["sessions"]]
  }
  statement {
    sid = "MainTable"
    actions = [
      "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem",
      "dynamodb:Query", "dynamodb:BatchWriteItem",
      # account deletion marks the user guard (USER#{id} / GUARD) deleted
      "dynamodb:UpdateItem",
    ]
    resources = [module.tables.arns["main"]]
  }
  statement {
    # A period's workouts by date (GET /v1/milestones/{id}/workouts and
    # /timeline), and the newest one's zone (a streak's today, a pace).
    sid       = "WorkoutLog"
    actions   = ["dynamodb:Query"]
    resources = ["${module.tables.arns["main"]}/index/LSI1"]
  }
  statement {
    # Entries; account deletion also brings the user's trail's TTL forward
    # (a Query of the user's entries, an UpdateItem each).
    sid       = "Audit"
    actions   = ["dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"]
    resources = [module.tables.arns["audit"]]
  }
  # Seal and open Strava tokens (model/secrets/kms). Only with an encryption
  # context of exactly {purpose = strava-tokens, userId = …}. The function
  # calls KMS directly, so these requests carry no kms:ViaService: requiring
  # it to be absent (Null = true) keeps any AWS service acting for this role
  # from using the key; a StringEquals on kms:ViaService would deny every call.
  statement {
    sid       = "SealStravaTokens"
    actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
    resources = [local.token_kms_key_arn]
    dynamic "condition" {
      for_each = local.token_key_conditions
      content {
        test     = condition.value.test
        variable = condition.value.variable
        values   = condition.value.values
      }
    }
  }
  statement {
    sid       = "InvokeWorker"
    actions   = ["lambda:InvokeFunction"]
    resources = [module.worker.function_arn]
  }
  statement {
    sid       = "ReadSecrets"
    actions   = ["ssm:GetParameter"]
    resources = [var.strava.client_secret_param_arn, var.strava.verify_token_param_arn]
  }
  # The SecureStrings' customer managed key, only through SSM.
  dynamic "statement" {
    for_each = local.secret_keys
    content {
      sid       = "DecryptSecrets"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]
      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = [local.via_ssm]
      }
    }
  }
  # The tables' customer managed key, only through DynamoDB: every read and
  # write (and stream read) of an encrypted table decrypts its table key with
  # the caller's credentials.
  dynamic "statement" {
    for_each = local.table_keys
    content {
      sid       = "TableKey"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]
      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = [local.via_dynamodb]
      }
    }
  }
}

# worker: athlete -> user through GSI1, token refresh (conditional writes),
# the normalized workout, the per-athlete read counters and parked jobs,
# deauthorization clean-up, audit, settling its job's outbox item (read,
# conditional update; a burst's lease released the same way), and its own
# DLQ (Lambda sends failed async events with the function's role).
data "aws_iam_policy_document" "worker" {
  statement {
    sid       = "OutboxSettle"
    actions   = ["dynamodb:GetItem", "dynamodb:UpdateItem"]
    resources = [module.tables.arns["idempotency"]]
  }
  statement {
    sid = "MainTable"
    actions = [
      "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
      "dynamodb:Query",
      # a sync page written after a revocation is deleted in a transaction
      # with a check that no reconnect cleared the revocation
      "dynamodb:ConditionCheckItem",
    ]
    resources = [module.tables.arns["main"]]
  }
  statement {
    sid       = "AthleteIndex"
    actions   = ["dynamodb:Query"]
    resources = ["${module.tables.arns["main"]}/index/GSI1"]
  }
  # Sync jobs (backfill, reconciliation) read a listed page's stored
  # workouts by start date: LSI1, strongly consistent.
  statement {
    sid       = "WorkoutLogIndex"
    actions   = ["dynamodb:Query"]
    resources = ["${module.tables.arns["main"]}/index/LSI1"]
  }
  # Audit entries; a confirmed revocation also removes the Strava ids from
  # the user's entries (model/store/purge: a Query of the user's partition,
  # an UpdateItem per entry).
  statement {
    sid       = "Audit"
    actions   = ["dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"]
    resources = [module.tables.arns["audit"]]
  }
  statement {
    sid       = "ReadSecrets"
    actions   = ["ssm:GetParameter"]
    resources = [var.strava.client_secret_param_arn]
  }
  # The SecureStrings' customer managed key, only through SSM.
  dynamic "statement" {
    for_each = local.secret_keys
    content {
      sid       = "DecryptSecrets"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]
      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = [local.via_ssm]
      }
    }
  }
  # Seal and open Strava tokens (model/secrets/kms). Only with an encryption
  # context of exactly {purpose = strava-tokens, userId = …}. The function
  # calls KMS directly, so these requests carry no kms:ViaService: requiring
  # it to be absent (Null = true) keeps any AWS service acting for this role
  # from using the key; a StringEquals on kms:ViaService would deny every call.
  statement {
    sid       = "SealStravaTokens"
    actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
    resources = [local.token_kms_key_arn]
    dynamic "condition" {
      for_each = local.token_key_conditions
      content {
        test     = condition.value.test
        variable = condition.value.variable
        values   = condition.value.values
      }
    }
  }
  statement {
    sid       = "OnFailureDestination"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.worker_dlq.arn]
  }
  # The tables' customer managed key, only through DynamoDB: every read and
  # write (and stream read) of an encrypted table decrypts its table key with
  # the caller's credentials.
  dynamic "statement" {
    for_each = local.table_keys
    content {
      sid       = "TableKey"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]
      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = [local.via_dynamodb]
      }
    }
  }
}

# projector: recompute from the workout log (Query), optimistic progress
# updates, award minting in one transaction, the stream, audit, and its DLQ
# (the event source mapping sends failed batches with the function's role).
data "aws_iam_policy_document" "projector" {
  statement {
    sid       = "MainTable"
    actions   = ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"]
    resources = [module.tables.arns["main"]]
  }
  # The user guard's check for webhook workout writes: a workout written
  # after an account deletion is deleted, one written after a revocation is
  # deleted in a transaction with a check that no reconnect cleared it.
  statement {
    sid       = "GuardedWrites"
    actions   = ["dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"]
    resources = [module.tables.arns["main"]]
  }
  # The workout log: LSI1 (workouts by start date), read strongly consistent.
  statement {
    sid       = "WorkoutLogIndex"
    actions   = ["dynamodb:Query"]
    resources = ["${module.tables.arns["main"]}/index/LSI1"]
  }
  statement {
    sid       = "Stream"
    actions   = ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"]
    resources = [module.tables.stream_arn]
  }
  # Lambda's stream poller lists the table's streams; AWS documents this grant
  # on <table>/stream/* (it is the same table, never another one).
  statement {
    sid       = "ListStreams"
    actions   = ["dynamodb:ListStreams"]
    resources = ["${module.tables.arns["main"]}/stream/*"]
  }
  # AWARD_MINTED entries are put in the mint transaction; Query finds a
  # milestone's entries (what justifies an award the log no longer earns).
  statement {
    sid       = "Audit"
    actions   = ["dynamodb:PutItem", "dynamodb:Query"]
    resources = [module.tables.arns["audit"]]
  }
  statement {
    sid       = "OnFailureDestination"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.projector_dlq.arn]
  }
  # The tables' customer managed key, only through DynamoDB: every read and
  # write (and stream read) of an encrypted table decrypts its table key with
  # the caller's credentials.
  dynamic "statement" {
    for_each = local.table_keys
    content {
      sid       = "TableKey"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]
      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = [local.via_dynamodb]
      }
    }
  }
}

# sweeper: lists due outbox items through the sparse Pending index (Query on
# that index only, never the table, never a Scan), leases each with a
# conditional UpdateItem (and parks an undecodable one the same way), or an
# athlete's bursts as one (conditional UpdateItems of its burst lease, taken
# and released when a hand-off fails; the bursts' jobs read with
# BatchGetItem), and
# hands it to the worker with an async invoke. On the reconcile schedule it
# reads and saves its enumeration cursor (GetItem/PutItem of
# RECONCILE#STRAVA only), counts and lists users through the sparse users
# index (GSI2), reads each one's milestones (Query on the table), sync
# state and connection status (GetItem) and recent workouts (Query on
# LSI1), and claims a reconciliation job (UpdateItem).
data "aws_iam_policy_document" "sweeper" {
  statement {
    sid       = "PendingIndex"
    actions   = ["dynamodb:Query"]
    resources = ["${module.tables.arns["idempotency"]}/index/Pending"]
  }
  statement {
    sid       = "OutboxLease"
    actions   = ["dynamodb:UpdateItem", "dynamodb:BatchGetItem"]
    resources = [module.tables.arns["idempotency"]]
  }
  statement {
    sid       = "UsersIndex"
    actions   = ["dynamodb:Query"]
    resources = ["${module.tables.arns["main"]}/index/GSI2"]
  }
  statement {
    sid       = "ConnectionStatus"
    actions   = ["dynamodb:GetItem"]
    resources = [module.tables.arns["main"]]
  }
  statement {
    sid       = "ReconcileChecks"
    actions   = ["dynamodb:Query"]
    resources = [module.tables.arns["main"], "${module.tables.arns["main"]}/index/LSI1"]
  }
  statement {
    sid       = "ReconcileCursor"
    actions   = ["dynamodb:PutItem"]
    resources = [module.tables.arns["main"]]
    condition {
      test     = "ForAllValues:StringEquals"
      variable = "dynamodb:LeadingKeys"
      values   = ["RECONCILE#STRAVA"]
    }
  }
  statement {
    sid       = "InvokeWorker"
    actions   = ["lambda:InvokeFunction"]
    resources = [module.worker.function_arn]
  }
  # The tables' customer managed key, only through DynamoDB.
  dynamic "statement" {
    for_each = local.table_keys
    content {
      sid       = "TableKey"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]
      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = [local.via_dynamodb]
      }
    }
  }
}

# The token key's policy (aws_kms_key.tokens): management for the
# administrators, use for the api and worker roles only.
data "aws_caller_identity" "current" {}

data "aws_partition" "current" {}

data "aws_iam_policy_document" "token_key" {
  statement {
    sid = "Administer"
    principals {
      type        = "AWS"
      identifiers = coalesce(var.token_key_admin_arns, ["arn:${data.aws_partition.current.partition}:iam::${data.aws_caller_identity.current.account_id}:root"])
    }
    # Management only: no Encrypt, Decrypt, GenerateDataKey*, ReEncrypt*
    # and no CreateGrant (a grant could hand use to anyone).
    actions = [
      "kms:CancelKeyDeletion", "kms:CreateAlias", "kms:DeleteAlias", "kms:DescribeKey", "kms:DisableKey",
      "kms:DisableKeyRotation", "kms:EnableKey", "kms:EnableKeyRotation", "kms:GetKeyPolicy", "kms:GetKeyRotationStatus",
      "kms:ListAliases", "kms:ListGrants", "kms:ListKeyPolicies", "kms:ListKeyRotations", "kms:ListResourceTags",
      "kms:PutKeyPolicy", "kms:RevokeGrant", "kms:RotateKeyOnDemand", "kms:ScheduleKeyDeletion", "kms:TagResource",
      "kms:UntagResource", "kms:UpdateAlias", "kms:UpdateKeyDescription",
    ]
    resources = ["*"]
  }
  statement {
    sid = "SealAndOpenStravaTokens"
    principals {
      type        = "AWS"
      identifiers = [module.api.role_arn, module.worker.role_arn]
    }
    actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
    resources = ["*"]
    # The IAM policies' conditions, repeated: the key policy alone grants
    # no more than they do (the context's two keys exactly, a userId, and
    # no AWS service acting for the roles).
    dynamic "condition" {
      for_each = local.token_key_conditions
      content {
        test     = condition.value.test
        variable = condition.value.variable
        values   = condition.value.values
      }
    }
  }
}

# ------------------------------------------------------------- functions

module "api" {
  source = "../function"

  name        = "${local.name}-api"
  description = "CommitCollect HTTP API: Strava webhook, OAuth and the /v1 BFF."
  zip_path    = "${var.artifacts_dir}/api.zip"
  settings    = var.functions.api
  policy_json = data.aws_iam_policy_document.api.json
  log_level   = var.log_level
  environment = merge(local.common_env, local.strava_env, local.tokens_env, local.outbox_env, {
    STRAVA_VERIFY_TOKEN_PARAM = var.strava.verify_token_param_arn
    CC_PUBLIC_URL             = local.public_url
    CC_WORKER_FUNCTION        = module.worker.function_name
    CC_CORS_ORIGINS           = join(",", var.cors_origins)
    CC_SYNC_MAX_DAYS          = tostring(var.backfill.max_days)
    CC_WEBHOOK_PATH_SECRET    = join(",", local.webhook_secrets)
    }, {
    # Set once the push subscription exists; until then the webhook refuses events.
    for k, v in { STRAVA_SUBSCRIPTION_ID = var.strava.subscription_id } : k => tostring(v) if v != null
  })
  log_retention_days = var.log_retention_days
  alarms             = { topic_arn = var.alarms.topic_arn, period_s = var.alarms.period_s }
  tags               = var.tags
}

module "worker" {
  source = "../function"

  name        = "${local.name}-worker"
  description = "CommitCollect worker: fetches a Strava activity and writes the normalized workout."
  zip_path    = "${var.artifacts_dir}/worker.zip"
  settings    = var.functions.worker
  policy_json = data.aws_iam_policy_document.worker.json
  log_level   = var.log_level
  environment = merge(local.common_env, local.strava_env, local.tokens_env, local.reconcile_env, {
    CC_ATHLETE_READS_PER_WINDOW = tostring(var.worker.athlete_reads_per_window)
    CC_ATHLETE_READS_PER_DAY    = tostring(var.worker.athlete_reads_per_day)
    CC_SYNC_BUDGET_SHARE        = tostring(var.backfill.budget_share)
  })
  log_retention_days = var.log_retention_days
  alarms             = { topic_arn = var.alarms.topic_arn, period_s = var.alarms.period_s }
  tags               = var.tags
}

module "projector" {
  source = "../function"

  name               = "${local.name}-projector"
  description        = "CommitCollect projector: recomputes milestones and mints awards from the main table's stream."
  zip_path           = "${var.artifacts_dir}/projector.zip"
  settings           = var.functions.projector
  policy_json        = data.aws_iam_policy_document.projector.json
  log_level          = var.log_level
  environment        = local.common_env
  log_retention_days = var.log_retention_days
  alarms             = { topic_arn = var.alarms.topic_arn, period_s = var.alarms.period_s }
  tags               = var.tags
}

module "sweeper" {
  source = "../function"

  name        = "${local.name}-sweeper"
  description = "CommitCollect outbox sweeper: re-dispatches accepted webhook events whose hand-off was lost or whose deferral ended."
  zip_path    = "${var.artifacts_dir}/sweeper.zip"
  settings    = var.functions.sweeper
  policy_json = data.aws_iam_policy_document.sweeper.json
  log_level   = var.log_level
  environment = merge(local.common_env, local.outbox_env, local.reconcile_env, {
    CC_WORKER_FUNCTION = module.worker.function_name
  })
  log_retention_days = var.log_retention_days
  alarms             = { topic_arn = var.alarms.topic_arn, period_s = var.alarms.period_s }
  tags               = var.tags
}

# ------------------------------------------------------ sweeper schedule

resource "aws_cloudwatch_event_rule" "sweeper" {
  name                = "${local.name}-sweeper"
  description         = "Runs the outbox sweeper: accepted webhook events are never lost to a failed hand-off."
  schedule_expression = var.sweeper.schedule
  tags                = var.tags
}

resource "aws_cloudwatch_event_target" "sweeper" {
  rule = aws_cloudwatch_event_rule.sweeper.name
  arn  = module.sweeper.function_arn
}

resource "aws_lambda_permission" "sweeper_schedule" {
  statement_id  = "AllowScheduleInvoke"
  action        = "lambda:InvokeFunction"
  function_name = module.sweeper.function_name
  principal     = "events.amazonaws.com"
  source_arn    = aws_cloudwatch_event_rule.sweeper.arn
}

# --------------------------------------------------- reconcile schedule

# Reconciliation: every minute the sweeper takes one step of the resumable
# enumeration, which comes to each user once per var.reconcile.interval_hours
# (at ceil(users x 1 min / interval) users a step, cursor saved per page)
# and enqueues a job re-listing the recent days only for athletes with an
# active milestone that uploaded since their last reconciliation (or whose
# last one is idle_hours old); see handlers/ingest, "Backfill and
# reconciliation". Its own rule, so its rate is independent of the sweeps.
resource "aws_cloudwatch_event_rule" "reconcile" {
  name                = "${local.name}-reconcile"
  description         = "One step of the reconciliation's enumeration of athletes (each once per interval)."
  schedule_expression = "rate(1 minute)"
  tags                = var.tags
}

resource "aws_cloudwatch_event_target" "reconcile" {
  rule  = aws_cloudwatch_event_rule.reconcile.name
  arn   = module.sweeper.function_arn
  input = jsonencode({ task = "reconcile" })
}

resource "aws_lambda_permission" "reconcile_schedule" {
  statement_id  = "AllowReconcileScheduleInvoke"
  action        = "lambda:InvokeFunction"
  function_name = module.sweeper.function_name
  principal     = "events.amazonaws.com"
  source_arn    = aws_cloudwatch_event_rule.reconcile.arn
}

# ------------------------------------------------- worker async invoke

resource "aws_lambda_function_event_invoke_config" "worker" {
  function_name                = module.worker.function_name
  maximum_retry_attempts       = var.worker.maximum_retry_attempts
  maximum_event_age_in_seconds = var.worker.maximum_event_age_s

  destination_config {
    on_failure {
      destination = aws_sqs_queue.worker_dlq.arn
    }
  }
}

# ------------------------------------------------ projector stream mapping

resource "aws_lambda_event_source_mapping" "projector" {
  event_source_arn  = module.tables.stream_arn
  function_name     = module.projector.function_arn
  starting_position = var.projector.starting_position

  batch_size                         = var.projector.batch_size
  maximum_batching_window_in_seconds = var.projector.batching_window_s
  parallelization_factor             = var.projector.parallelization_factor

  # Partial batch failures (events.DynamoDBEventResponse), bisect on error,
  # bounded retries and record age, then the record goes to the DLQ.
  function_response_types        = ["ReportBatchItemFailures"]
  bisect_batch_on_function_error = true
  maximum_retry_attempts         = var.projector.maximum_retry_attempts
  maximum_record_age_in_seconds  = var.projector.maximum_record_age_s

  destination_config {
    on_failure {
      destination_arn = aws_sqs_queue.projector_dlq.arn
    }
  }

  # Only the records the projector acts on (DESIGN.md, projection contract).
  # Its own progress writes stamp writtenBy = "projector" and never match, so
  # they cannot re-trigger it. Values mirror keys.PrefixWorkoutStrava, keys.SKSyncStrava,
  # model.EntityMilestone and model.WriterProjector (checked by test/terraform).
  filter_criteria {
    # Workouts: a new, changed or removed WORKOUT#STRAVA# item (deletes are
    # marked; items are removed by TTL after a deauthorization, or by an
    # account deletion: the log lost them, the milestones must follow).
    filter {
      pattern = jsonencode({
        eventName = ["INSERT", "MODIFY", "REMOVE"]
        dynamodb  = { Keys = { SK = { S = [{ prefix = "WORKOUT#STRAVA#" }] } } }
      })
    }
    # A sync's projection request: the sync state (its projectedCount grew,
    # the consumer checks) projects the imported workouts at once.
    filter {
      pattern = jsonencode({
        eventName = ["INSERT", "MODIFY"]
        dynamodb  = { Keys = { SK = { S = ["SYNC#STRAVA"] } } }
      })
    }
    # A new milestone.
    filter {
      pattern = jsonencode({
        eventName = ["INSERT"]
        dynamodb  = { NewImage = { entityType = { S = ["MILESTONE"] } } }
      })
    }
    # A milestone whose definition changed (written by anyone but the projector).
    filter {
      pattern = jsonencode({
        eventName = ["MODIFY"]
        dynamodb = { NewImage = {
          entityType = { S = ["MILESTONE"] }
          writtenBy  = { S = [{ "anything-but" = ["projector"] }] }
        } }
      })
    }
  }
}

# ------------------------------------------------------------- HTTP API

resource "aws_apigatewayv2_api" "http" {
  name          = local.name
  protocol_type = "HTTP"
  description   = "CommitCollect: Strava webhook, OAuth and the /v1 BFF."

  # CORS preflights (OPTIONS) are answered here: no OPTIONS route reaches the
  # Lambda, and API Gateway sets the CORS headers of every response for the
  # same origins as the api's CC_CORS_ORIGINS (credentials: the session cookie).
  dynamic "cors_configuration" {
    for_each = length(var.cors_origins) > 0 ? [1] : []
    content {
      allow_origins     = var.cors_origins
      allow_methods     = ["GET", "POST", "DELETE"]
      allow_headers     = ["content-type"]
      expose_headers    = ["link"] # the next page of the export and of the awards
      allow_credentials = true
      max_age           = 600
    }
  }

  tags = var.tags
}

resource "aws_apigatewayv2_integration" "api" {
  api_id                 = aws_apigatewayv2_api.http.id
  integration_type       = "AWS_PROXY"
  integration_uri        = module.api.invoke_arn
  payload_format_version = "2.0"
  timeout_milliseconds   = 29000
}

resource "aws_apigatewayv2_route" "api" {
  for_each = toset(local.routes)

  api_id    = aws_apigatewayv2_api.http.id
  route_key = each.value
  target    = "integrations/${aws_apigatewayv2_integration.api.id}"
}

resource "aws_cloudwatch_log_group" "api_access" {
  name              = "/aws/apigateway/${local.name}"
  retention_in_days = var.log_retention_days
  tags              = var.tags
}

# Throttling per route: the BFF's routes share the stage default; the bare
# /webhooks/strava (a subscription registered before the webhook's own API)
# and /auth/* (unauthenticated, the login writes an item per request) get a
# low budget of their own. Strava's deliveries go to the webhook's own API
# (webhook.tf), which no flood of this one reaches.
locals {
  route_throttles = { for r in local.routes : r => { rate = var.api.auth_rate_limit, burst = var.api.auth_burst_limit } if startswith(r, "GET /auth/") || startswith(r, "POST /auth/") || endswith(r, " /webhooks/strava") }
}

resource "aws_apigatewayv2_stage" "default" {
  api_id      = aws_apigatewayv2_api.http.id
  name        = "$default"
  auto_deploy = true

  default_route_settings {
    throttling_rate_limit  = var.api.throttling_rate_limit
    throttling_burst_limit = var.api.throttling_burst_limit
  }

  dynamic "route_settings" {
    for_each = local.route_throttles
    content {
      route_key              = route_settings.key
      throttling_rate_limit  = route_settings.value.rate
      throttling_burst_limit = route_settings.value.burst
    }
  }

  # route_settings name routes that must exist first.
  depends_on = [aws_apigatewayv2_route.api]

  access_log_settings {
    destination_arn = aws_cloudwatch_log_group.api_access.arn
    format = jsonencode({
      requestId      = "$context.requestId"
      routeKey       = "$context.routeKey"
      status         = "$context.status"
      latencyMs      = "$context.responseLatency"
      integrationErr = "$context.integrationErrorMessage"
      sourceIp       = "$context.identity.sourceIp"
    })
  }

  tags = var.tags
}

resource "aws_lambda_permission" "http_api" {
  statement_id  = "AllowHttpApiInvoke"
  action        = "lambda:InvokeFunction"
  function_name = module.api.function_name
  principal     = "apigateway.amazonaws.com"
  source_arn    = "${aws_apigatewayv2_api.http.execution_arn}/*/*"
}

# ---------------------------------------------------------------- alarms
# Function errors and throttles are in modules/function (one pair each).

resource "aws_cloudwatch_metric_alarm" "projector_iterator_age" {
  alarm_name          = "${local.name}-projector-iterator-age"
  alarm_description   = "The projector is falling behind the main table's stream (records older than the threshold)."
  namespace           = "AWS/Lambda"
  metric_name         = "IteratorAge"
  dimensions          = { FunctionName = module.projector.function_name }
  statistic           = "Maximum"
  period              = var.alarms.period_s
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = var.alarms.iterator_age_ms
  treat_missing_data  = "notBreaching"
  alarm_actions       = [var.alarms.topic_arn]
  ok_actions          = [var.alarms.topic_arn]
  tags                = var.tags
}

# The projector's own EMF metric (projections/consumer/metrics.go): a
# milestone's period holds more workouts than the guardrail lets it read, so
# its progress is exact only from exactFromUtc on.
resource "aws_cloudwatch_metric_alarm" "projector_truncated" {
  alarm_name          = "${local.name}-projector-milestones-truncated"
  alarm_description   = "A milestone's period holds more than 3000 workouts (MaxWorkoutsToInspect): its progress is marked truncated and exact only from exactFromUtc. See the projector's warning logs for the user."
  namespace           = "CommitCollect/Projector"
  metric_name         = "MilestonesTruncated"
  dimensions          = { Service = "projector" }
  statistic           = "Sum"
  period              = var.alarms.period_s
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = [var.alarms.topic_arn]
  ok_actions          = [var.alarms.topic_arn]
  tags                = var.tags
}

# The outbox backlog: the sweeper reports how many items were due per sweep
# (handlers/ingest/handoff.SweeperMetricsNamespace). Due items every sweep for three
# periods means hand-offs keep failing or work arrives faster than it drains.
resource "aws_cloudwatch_metric_alarm" "outbox_backlog" {
  alarm_name          = "${local.name}-outbox-backlog"
  alarm_description   = "Accepted webhook events keep waiting in the outbox (due items per sweep at or above the threshold)."
  namespace           = "CommitCollect/Sweeper"
  metric_name         = "OutboxDue"
  dimensions          = { Service = "sweeper" }
  statistic           = "Maximum"
  period              = var.alarms.period_s
  evaluation_periods  = 3
  comparison_operator = "GreaterThanOrEqualToThreshold"
  threshold           = var.sweeper.backlog_alarm_at
  treat_missing_data  = "notBreaching"
  alarm_actions       = [var.alarms.topic_arn]
  ok_actions          = [var.alarms.topic_arn]
  tags                = var.tags
}

# Audit entries the store could not write (throttled past the SDK's
# retries, or any other failure): Store.Audit never fails the business write,
# so each dropped entry is counted as one EMF line (model/store.
# AuditMetricsNamespace, AuditWritesDropped, TableName = the audit table).
# Any drop alarms: the audit trail has a gap.
resource "aws_cloudwatch_metric_alarm" "audit_writes_dropped" {
  alarm_name          = "${local.name}-audit-writes-dropped"
  alarm_description   = "Audit entries were dropped (throttled or failed writes to the audit table); the audit trail has a gap."
  namespace           = "CommitCollect/Audit"
  metric_name         = "AuditWritesDropped"
  dimensions          = { TableName = module.tables.names["audit"] }
  statistic           = "Sum"
  period              = var.alarms.period_s
  evaluation_periods  = 1
  comparison_operator = "GreaterThanOrEqualToThreshold"
  threshold           = 1
  treat_missing_data  = "notBreaching"
  alarm_actions       = [var.alarms.topic_arn]
  ok_actions          = [var.alarms.topic_arn]
  tags                = var.tags
}

# Strava refused the application's own client id or secret (a fault on the
# "Application" resource, e.g. a secret rotated on Strava's settings page and
# not yet here). No athlete is flagged and no job fails: every job that needs
# a token waits (handlers/ingest.DeferForAppCredentials) and the worker counts
# each in its EMF metric StravaAppCredentialsRejected. Work resumes by itself
# once the deployment has the right secret.
resource "aws_cloudwatch_metric_alarm" "strava_app_credentials_rejected" {
  alarm_name          = "${local.name}-strava-app-credentials-rejected"
  alarm_description   = "StravaAppCredentialsRejected: Strava refuses this application's client id or secret. Put the current secret in the deployment; waiting jobs resume by themselves."
  namespace           = "CommitCollect/Worker"
  metric_name         = "StravaAppCredentialsRejected"
  dimensions          = { Service = "worker" }
  statistic           = "Sum"
  period              = var.alarms.period_s
  evaluation_periods  = 1
  comparison_operator = "GreaterThanOrEqualToThreshold"
  threshold           = 1
  treat_missing_data  = "notBreaching"
  alarm_actions       = [var.alarms.topic_arn]
  ok_actions          = [var.alarms.topic_arn]
  tags                = var.tags
}

# One athlete took more than a set share of Strava's read window: the worker
# writes AthleteReadShare (EMF, percent of the window's read limit, counted
# on the athlete's shared window counter: every instance's reads) for each
# athlete past an instance's own allowance, so its maximum is the heaviest
# athlete of the period. Their caps hold them back (AthleteReadsHeldBack
# counts the jobs); `make syncs ARGS=-readers` names the heaviest today.
resource "aws_cloudwatch_metric_alarm" "athlete_read_share" {
  alarm_name          = "${local.name}-athlete-read-share"
  alarm_description   = "AthleteReadShare: one athlete took more than ${var.alarms.athlete_read_share_pct}% of a Strava read window. Their caps hold them back; find them with make syncs ARGS=-readers (a forged flood, a bulk upload, a stuck device)."
  namespace           = "CommitCollect/Worker"
  metric_name         = "AthleteReadShare"
  dimensions          = { Service = "worker" }
  statistic           = "Maximum"
  period              = var.alarms.period_s
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = var.alarms.athlete_read_share_pct
  treat_missing_data  = "notBreaching"
  alarm_actions       = [var.alarms.topic_arn]
  ok_actions          = [var.alarms.topic_arn]
  tags                = var.tags
}

resource "aws_cloudwatch_metric_alarm" "dlq_depth" {
  for_each = {
    worker    = aws_sqs_queue.worker_dlq.name
    projector = aws_sqs_queue.projector_dlq.name
  }

  alarm_name          = "${local.name}-${each.key}-dlq-depth"
  alarm_description   = "Messages are waiting in the ${each.key} DLQ: records were given up on and need a redrive."
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = each.value }
  statistic           = "Maximum"
  period              = var.alarms.period_s
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = [var.alarms.topic_arn]
  ok_actions          = [var.alarms.topic_arn]
  tags                = var.tags
}

# The worker is invoked asynchronously: an event Lambda could not deliver to
# the DLQ, or dropped (too old, retries exhausted with no destination), is
# lost without these.
resource "aws_cloudwatch_metric_alarm" "worker_async" {
  for_each = {
    destination-delivery-failures = "DestinationDeliveryFailures"
    async-events-dropped          = "AsyncEventsDropped"
  }

  alarm_name          = "${local.name}-worker-${each.key}"
  alarm_description   = "The worker's asynchronous invocations lost events (${each.value}): redrive from Strava or the DLQ."
  namespace           = "AWS/Lambda"
  metric_name         = each.value
  dimensions          = { FunctionName = module.worker.function_name }
  statistic           = "Sum"
  period              = var.alarms.period_s
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = [var.alarms.topic_arn]
  ok_actions          = [var.alarms.topic_arn]
  tags                = var.tags
}

# The HTTP API: server errors (the api Lambda failing or timing out),
# client errors (throttled answers are 429s: a flood, or limits set too low)
# and latency (Strava wants the webhook answered within 2 s).
resource "aws_cloudwatch_metric_alarm" "api" {
  for_each = {
    "5xx"   = { statistic = "Sum", threshold = 0, description = "The HTTP API answered 5xx (the api Lambda failed, timed out or was throttled). Strava gives up on a webhook after three attempts: once fixed, run make syncs ARGS=\"-reconcile-since <start of the outage, RFC3339>\" to re-list every athlete's activities since then." }
    "4xx"   = { statistic = "Sum", threshold = var.alarms.api_4xx, description = "The HTTP API answered more 4xx than usual: throttled requests (429, a flood or limits too low) or a client refused in numbers. Read the access log by routeKey and status." }
    latency = { statistic = "Maximum", threshold = var.alarms.api_latency_ms, description = "The HTTP API's slowest answer exceeded the threshold (Strava waits 2 s for the webhook)." }
  }

  alarm_name          = "${local.name}-api-${lower(each.key)}"
  alarm_description   = each.value.description
  namespace           = "AWS/ApiGateway"
  metric_name         = each.key == "latency" ? "Latency" : each.key
  dimensions          = { ApiId = aws_apigatewayv2_api.http.id }
  statistic           = each.value.statistic
  period              = var.alarms.period_s
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = each.value.threshold
  treat_missing_data  = "notBreaching"
  alarm_actions       = [var.alarms.topic_arn]
  ok_actions          = [var.alarms.topic_arn]
  tags                = var.tags
}

# Hook for further alarms (the outbox sweeper's backlog, …): declare them next
# to their resource here and add the metric to RequiredAlarms in
# test/terraform/plancheck.go, which fails the build while it is missing.
