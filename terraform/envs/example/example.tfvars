# Example values (placeholders). Create the two SecureString parameters first:
#   aws ssm put-parameter --type SecureString --name /commitcollect/example/strava-client-secret --value ...
#   aws ssm put-parameter --type SecureString --name /commitcollect/example/strava-verify-token --value ...
region      = "ap-southeast-2"
environment = "example"

strava = {
  client_id               = "12345"
  client_secret_param_arn = "arn:aws:ssm:ap-southeast-2:123456789012:parameter/commitcollect/example/strava-client-secret"
  verify_token_param_arn  = "arn:aws:ssm:ap-southeast-2:123456789012:parameter/commitcollect/example/strava-verify-token"
  callback_path_segment   = "replace-with-openssl-rand-hex-16"
  # subscription_id = 123456  # after creating the push subscription
}

alarm_topic_arn = "arn:aws:sns:ap-southeast-2:123456789012:platform-alarms"
