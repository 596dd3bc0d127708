package bff

import (
	"html/template"
	"net/http"
)

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}} · CommitCollect</title></head>
<body><main><h1>{{.Title}}</h1><p>{{.Message}}</p>{{if .Retry}}<p><a href="/auth/strava/login">Connect with Strava again</a></p>{{end}}</main></body></html>
`))

// page answers a browser route (login, callback) with a small HTML page.
func page(w http.ResponseWriter, status int, title, msg string, retry bool) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", PageCSP)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = pageTemplate.Execute(w, struct {
		Title, Message string
		Retry          bool
	}{title, msg, retry})
}
