# The four CommitCollect tables. Their shape mirrors model/store/dynamo/tables.go
# (store.Specs), the single source of truth: test/terraform fails when the two
# drift apart. Every key attribute is a string.

locals {
  tables = {
    main = {
      name      = "${var.table_prefix}CommitCollect"
      hash_key  = "PK"
      range_key = "SK"
      gsis = [
        # athlete -> user: only what store.ResolveAthlete decodes
        # (store.AthleteIndexAttributes), so a token write is not written twice.
        {
          name               = "GSI1"
          hash_key           = "GSI1PK"
          range_key          = "GSI1SK"
          projection_type    = "INCLUDE"
          non_key_attributes = ["entityType", "schemaVersion", "userId", "athleteId"]
        },
        # sparse users index
        { name = "GSI2", hash_key = "GSI2PK", range_key = "GSI2SK", projection_type = "ALL", non_key_attributes = null },
      ]
      # Workouts by start date (LSI1SK = WORKOUT#{start}#{id}), read strongly
      # consistent by the projector. Its attributes are model/counting's
      # LogFields (test/terraform fails when they differ). An LSI exists only
      # from table creation: see scripts/migrate-lsi for existing deployments.
      lsis = [
        {
          name      = "LSI1"
          range_key = "LSI1SK"
          non_key_attributes = [
            "entityType", "schemaVersion", "userId", "activityId", "sportType", "distanceMeters",
            "totalElevationGain", "movingTimeSeconds", "elapsedTimeSeconds", "startDateUtc", "isDeleted", "flags",
            "correlationId",
          ]
        },
      ]
      ttl_attribute = "expiresAt"
      stream_view   = "NEW_AND_OLD_IMAGES"
      pitr          = true
    }
    sessions = {
      name          = "${var.table_prefix}CommitCollectSessions"
      hash_key      = "PK"
      range_key     = "SK"
      gsis          = []
      lsis          = []
      ttl_attribute = "expiresAtUtc"
      stream_view   = null
      pitr          = true
    }
    audit = {
      name      = "${var.table_prefix}CommitCollectAudit"
      hash_key  = "PK"
      range_key = "SK"
      gsis = [
        { name = "GSI1", hash_key = "GSI1PK", range_key = "GSI1SK", projection_type = "ALL", non_key_attributes = null }, # by correlation id
        { name = "GSI2", hash_key = "GSI2PK", range_key = "GSI2SK", projection_type = "ALL", non_key_attributes = null }, # by event type and month
      ]
      lsis          = []
      ttl_attribute = "expiresAt"
      stream_view   = null
      pitr          = true
    }
    idempotency = {
      name      = "${var.table_prefix}CommitCollectIdempotency"
      hash_key  = "IdempotencyKey"
      range_key = null
      gsis = [
        # sparse: outbox items still pending, with what the sweeper lists
        # (store.PendingIndexAttributes); the lease reads the whole item.
        {
          name               = "Pending"
          hash_key           = "PendingPK"
          range_key          = "PendingSK"
          projection_type    = "INCLUDE"
          non_key_attributes = ["entityType", "schemaVersion", "correlationId", "createdAtUtc"]
        },
      ]
      lsis          = []
      ttl_attribute = "expiresAt"
      stream_view   = null
      pitr          = true
    }
  }
}

resource "aws_dynamodb_table" "this" {
  for_each = local.tables

  name         = each.value.name
  billing_mode = "PAY_PER_REQUEST"
  # Table-level hash_key/range_key are current in provider 6.x; only the
  # index-level ones are deprecated in favour of key_schema (used below).
  hash_key  = each.value.hash_key
  range_key = each.value.range_key

  deletion_protection_enabled = var.deletion_protection

  stream_enabled   = each.value.stream_view != null
  stream_view_type = each.value.stream_view

  dynamic "attribute" {
    for_each = distinct(compact(flatten([
      each.value.hash_key,
      each.value.range_key,
      [for g in each.value.gsis : [g.hash_key, g.range_key]],
      [for l in each.value.lsis : l.range_key],
    ])))
    content {
      name = attribute.value
      type = "S"
    }
  }

  dynamic "global_secondary_index" {
    for_each = each.value.gsis
    content {
      name = global_secondary_index.value.name
      # Changing an existing index's projection replaces the index (delete,
      # then create and backfill): see store.IndexSpec's migration note.
      projection_type    = global_secondary_index.value.projection_type
      non_key_attributes = global_secondary_index.value.non_key_attributes

      dynamic "key_schema" {
        for_each = compact([global_secondary_index.value.hash_key, global_secondary_index.value.range_key])
        content {
          attribute_name = key_schema.value
          key_type       = key_schema.key == 0 ? "HASH" : "RANGE"
        }
      }
    }
  }

  dynamic "local_secondary_index" {
    for_each = each.value.lsis
    content {
      name               = local_secondary_index.value.name
      range_key          = local_secondary_index.value.range_key
      projection_type    = "INCLUDE"
      non_key_attributes = local_secondary_index.value.non_key_attributes
    }
  }

  ttl {
    attribute_name = each.value.ttl_attribute
    enabled        = true
  }

  point_in_time_recovery {
    enabled = each.value.pitr
  }

  server_side_encryption {
    enabled     = true
    kms_key_arn = var.kms_key_arn
  }

  tags = var.tags
}
