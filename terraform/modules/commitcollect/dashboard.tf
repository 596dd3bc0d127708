# ------------------------------------------------------------- dashboard
# What each event costs in DynamoDB, beside what it is for: the projector's
# capacity per batch (its EMF metrics DynamoDBRequests, ConsumedReadUnits,
# ConsumedWriteUnits; projections/consumer/metrics.go) next to its lag,
# iterator age and errors; the api's and worker's capacity from their log
# lines ("request served", "job finished": requests, rcu, wcu; handlers/app
# and handlers/ingest) through Logs Insights; the tables' own consumed
# capacity as DynamoDB bills it; the Strava read budget by class (the
# worker's EMF metric StravaReads, dimension Class: webhook, backfill,
# reconcile, confirm; handlers/ingest/budget/reads.go) against the read
# limit's sync share. test/terraform checks the metrics are here.

locals {
  dashboard_period = var.alarms.period_s
  projector_emf    = "CommitCollect/Projector"
  worker_emf       = "CommitCollect/Worker"
  read_classes     = ["webhook", "backfill", "reconcile", "confirm"]
  function_names = {
    api       = module.api.function_name
    worker    = module.worker.function_name
    projector = module.projector.function_name
    sweeper   = module.sweeper.function_name
  }
  # Logs Insights: the summed capacity of every api request and worker job.
  capacity_query = <<-EOQ
    fields requests, rcu, wcu
    | filter msg = "request served" or msg = "job finished"
    | stats sum(requests) as requests, sum(rcu) as rcu, sum(wcu) as wcu, count(*) as invocations by msg, bin(5m)
  EOQ
}

resource "aws_cloudwatch_dashboard" "capacity" {
  dashboard_name = "${local.name}-capacity"
  dashboard_body = jsonencode({
    widgets = [
      {
        type = "metric", x = 0, y = 0, width = 12, height = 6
        properties = {
          title  = "Projector: DynamoDB requests and capacity units (sum per period)"
          region = data.aws_region.current.region
          stat   = "Sum"
          period = local.dashboard_period
          view   = "timeSeries"
          metrics = [
            [local.projector_emf, "DynamoDBRequests", "Service", "projector"],
            [local.projector_emf, "ConsumedReadUnits", "Service", "projector"],
            [local.projector_emf, "ConsumedWriteUnits", "Service", "projector"],
            [local.projector_emf, "RecordsSeen", "Service", "projector"],
          ]
        }
      },
      {
        type = "metric", x = 12, y = 0, width = 12, height = 6
        properties = {
          title  = "Projector lag (ms) and stream iterator age (ms)"
          region = data.aws_region.current.region
          stat   = "Maximum"
          period = local.dashboard_period
          view   = "timeSeries"
          metrics = [
            [local.projector_emf, "ProjectionLag", "Service", "projector"],
            [local.projector_emf, "BatchDuration", "Service", "projector"],
            ["AWS/Lambda", "IteratorAge", "FunctionName", local.function_names.projector],
          ]
        }
      },
      {
        type = "metric", x = 0, y = 6, width = 12, height = 6
        properties = {
          title  = "Errors: functions, failed and parked stream records"
          region = data.aws_region.current.region
          stat   = "Sum"
          period = local.dashboard_period
          view   = "timeSeries"
          metrics = concat(
            [for role, fn in local.function_names : ["AWS/Lambda", "Errors", "FunctionName", fn]],
            [
              [local.projector_emf, "RecordsFailed", "Service", "projector"],
              [local.projector_emf, "RecordsParked", "Service", "projector"],
            ],
          )
        }
      },
      {
        type = "metric", x = 12, y = 6, width = 12, height = 6
        properties = {
          title  = "Tables: consumed read and write units (as billed)"
          region = data.aws_region.current.region
          stat   = "Sum"
          period = local.dashboard_period
          view   = "timeSeries"
          metrics = concat(
            [for role, table in module.tables.names : ["AWS/DynamoDB", "ConsumedReadCapacityUnits", "TableName", table]],
            [for role, table in module.tables.names : ["AWS/DynamoDB", "ConsumedWriteCapacityUnits", "TableName", table]],
          )
        }
      },
      {
        type = "metric", x = 0, y = 18, width = 24, height = 6
        properties = {
          title   = "Strava budget by class: reads per 15 minutes (Strava's read window), stacked"
          region  = data.aws_region.current.region
          stat    = "Sum"
          period  = 900
          view    = "timeSeries"
          stacked = true
          metrics = [for class in local.read_classes : [local.worker_emf, "StravaReads", "Class", class]]
        }
      },
      {
        type = "log", x = 0, y = 12, width = 24, height = 6
        properties = {
          title  = "Ingestion: DynamoDB requests and capacity units of api requests and worker jobs"
          region = data.aws_region.current.region
          view   = "table"
          query  = "SOURCE '${module.api.log_group_name}' | SOURCE '${module.worker.log_group_name}' | ${replace(trimspace(local.capacity_query), "\n", " ")}"
        }
      },
    ]
  })
}
