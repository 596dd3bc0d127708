package bff

// SetAfterStep makes account deletion run f after each step; an error from f
// stops the deletion there, as a crash would.
func SetAfterStep(h *Handler, f func(step string) error) { h.deleter.AfterStep = f }

// SyncJSONOf presents a stored sync state as GET /v1/me does.
var SyncJSONOf = syncJSON

// SetExportPageBytes bounds the export's pages to n bytes (small pages
// with a small history).
func SetExportPageBytes(h *Handler, n int) { h.exportPageBytes = n }
