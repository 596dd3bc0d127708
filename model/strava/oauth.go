// Package strava is the adapter for Strava's OAuth and REST API. Both hang off
// one base URL (https://www.strava.com, or the local simulator).
package strava

import (
	"fmt"
	"strings"

	"golang.org/x/oauth2"

	"github.com/commitcollect/backend/model"
)

// Scopes CommitCollect asks for. Strava's consent page lets the athlete
// untick each: activity:read_all also reads private activities,
// activity:read only the others (a private one then answers 404 and counts
// as hidden); with neither we can read nothing, and only that is a refusal.
const (
	ScopeRead            = "read"
	ScopeActivityRead    = "activity:read"
	ScopeActivityReadAll = "activity:read_all"
)

// OAuthConfig returns the oauth2 configuration for Strava: credentials travel
// in the form body (Strava does not accept HTTP Basic) and scopes are
// comma-separated, so they are joined into one scope value.
func OAuthConfig(baseURL, clientID, clientSecret, redirectURL string) *oauth2.Config {
	base := strings.TrimRight(baseURL, "/")
	return &oauth2.Config{
		ClientID:     clientID,
		ClientSecret: clientSecret,
		RedirectURL:  redirectURL,
		Scopes:       []string{strings.Join([]string{ScopeRead, ScopeActivityRead, ScopeActivityReadAll}, ",")},
		Endpoint: oauth2.Endpoint{
			AuthURL:   base + "/oauth/authorize",
			TokenURL:  base + "/oauth/token",
			AuthStyle: oauth2.AuthStyleInParams,
		},
	}
}

// Athlete is the summary Strava returns with a token.
type Athlete struct {
	ID        int64  `json:"id"`
	Firstname string `json:"firstname"`
	Lastname  string `json:"lastname"`
}

// AthleteFromToken reads the athlete summary Strava includes in the
// authorization_code token response. It returns ErrInvalid when absent.
func AthleteFromToken(tok *oauth2.Token) (Athlete, error) {
	raw, ok := tok.Extra("athlete").(map[string]any)
	if !ok {
		return Athlete{}, fmt.Errorf("token response has no athlete: %w", model.ErrInvalid)
	}
	id, err := exactInt(raw["id"])
	if err != nil || id <= 0 {
		return Athlete{}, fmt.Errorf("token response athlete id %v: %w", raw["id"], model.ErrInvalid)
	}
	first, _ := raw["firstname"].(string)
	last, _ := raw["lastname"].(string)
	return Athlete{ID: id, Firstname: first, Lastname: last}, nil
}

// ActivityScope is the widest activity scope among the granted ones:
// activity:read_all, else activity:read, else "" (no activity can be read).
func ActivityScope(scopes []string) string {
	best := ""
	for _, s := range scopes {
		switch {
		case s == ScopeActivityReadAll:
			return s
		case s == ScopeActivityRead:
			best = s
		}
	}
	return best
}

// ParseScopes splits Strava's comma-separated granted-scope string.
func ParseScopes(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
