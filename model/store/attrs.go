package store

// Attribute names written outside a full-item Put.
const (
	attrGrantedAtUtc       = "grantedAtUtc"
	attrUpdatedAtUtc       = "updatedAtUtc"
	attrStravaRevokedAtUtc = "stravaRevokedAtUtc"
	attrStravaDataExpires  = "stravaDataExpiresAt"
)

// Attribute names the ingestion path writes outside a full-item Put.
const (
	attrTokenVersion      = "tokenVersion"
	attrRefreshLeaseUntil = "refreshLeaseUntil" // epoch seconds; absent = no refresh in flight
	attrCreatedAtUtc      = "createdAtUtc"
	attrIsDeleted         = "isDeleted"
	attrDeletedAtUtc      = "deletedAtUtc"
	attrDeletedReason     = "deletedReason"
	attrFetchStartedAtNs  = "fetchStartedAtNs"
	attrSyncJobKey        = "syncJobKey"
	attrExpiresAt         = "expiresAt"
)
