package bff

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/commitcollect/backend/handlers/bff/respond"
	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/strava"
)

// SessionStore keeps login states and sessions (the sessions table, and each
// session's pointer in the user's partition).
type SessionStore interface {
	PutOAuthState(ctx context.Context, st *model.OAuthState) error
	// ConsumeOAuthState deletes and returns a login state; model.ErrNotFound
	// when it does not exist (expired, or used).
	ConsumeOAuthState(ctx context.Context, state string) (model.OAuthState, error)
	CreateSession(ctx context.Context, s *model.Session) error
	Session(ctx context.Context, sessionID string) (model.Session, error)
	DeleteSession(ctx context.Context, userID, sessionID string) error
}

// ConnectionStore is the user's Strava connection: read, a fresh login's
// tokens, and the end of a revocation (the connections adapter).
type ConnectionStore interface {
	// StravaConnection reads the user's connection; ErrNotFound without.
	StravaConnection(ctx context.Context, userID string) (*model.StravaConnection, error)
	// SaveLoginTokens stores a fresh login's tokens on the user's
	// connection (checked against the user guard).
	SaveLoginTokens(ctx context.Context, c *model.StravaConnection) error
	// ClearStravaRevocation clears the guard's revocation recorded at
	// revokedAt (a purge still running stops).
	ClearStravaRevocation(ctx context.Context, userID string, revokedAt, now time.Time) error
}

func (h *Handler) reqLog(r *http.Request) (*slog.Logger, string) {
	corr := model.NewID()
	return h.log.With("correlationId", corr, "route", r.Pattern), corr
}

func (h *Handler) setCookie(w http.ResponseWriter, name, value, path string, ttl time.Duration) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: path, MaxAge: int(ttl / time.Second),
		HttpOnly: true, Secure: h.secureCookie, SameSite: http.SameSiteLaxMode,
	})
}

func (h *Handler) clearCookie(w http.ResponseWriter, name, path string) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: "", Path: path, MaxAge: -1,
		HttpOnly: true, Secure: h.secureCookie, SameSite: http.SameSiteLaxMode,
	})
}

const callbackPath = "/auth/strava/callback"

// login starts a Strava login: it stores a single-use state, binds it to
// this browser with a short-lived cookie and redirects to Strava's authorize
// page.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	log, _ := h.reqLog(r)
	now := h.now().UTC()
	state := model.NewID()
	st := &model.OAuthState{StateHash: keys.SessionHash(state), CreatedAtUtc: now, ExpiresAtUtc: now.Add(h.cfg.StateTTL).Unix()}
	if err := h.sessions.PutOAuthState(r.Context(), st); err != nil {
		log.ErrorContext(r.Context(), "store login state failed", "error", err)
		page(w, http.StatusServiceUnavailable, "Sign-in is unavailable", "We could not start the sign-in. Please try again in a moment.", true)
		return
	}
	h.setCookie(w, StateCookie, state, callbackPath, h.cfg.StateTTL)
	http.Redirect(w, r, h.strava.AuthCodeURL(state), http.StatusFound)
}

// callback finishes a Strava login. The state is checked against this
// browser's state cookie first, and only a matching pair consumes it (single
// use); a refusal or a grant without activity:read writes nothing.
//
// Sessions: cc_session is a 128-bit random id (HttpOnly, SameSite=Lax, Secure
// unless CC_PUBLIC_URL is plain http on a loopback host; plain http elsewhere
// is refused at start-up) backed by CommitCollectSessions
// (SESSION#{sha256(id)}/META, TTL expiresAtUtc, 14 days). TTL deletion is
// lazy, so expiry is checked on every read. Each session also has a pointer
// USER#{userId}/SESSION#{sha256(id)} in the main table (same expiry, TTL
// expiresAt) so a user's sessions can be found without a Scan. Every error is
// {"error":{"code","message","fields"?}}; invalid UTF-8 text is 400 naming the
// field, bodies over 64 KiB are 413.
//
// First login writes profile, Strava connection (tokens sealed) and
// STRAVA#ATHLETE#{id}/OWNER in one transaction (the owner mapping is
// conditional), so one athlete is never linked to two users; a login that
// loses the race joins the winner. A returning athlete keeps their user; the
// new tokens are stored with a conditional tokenVersion bump and the login's
// time as the grant (grantedAtUtc, what a deauthorization event is compared
// with). A confirmed deauthorization deletes the owner mapping with the
// Strava data but leaves a keyed hash of the athlete id, so a reconnecting
// athlete gets the same user back: the login restores the athlete's id and
// name, clears the guard's revocation (conditional on the one it read;
// STRAVA_RECONNECTED), saves the tokens, and the backfill imports the
// history again; milestones and awards were never touched.
func (h *Handler) callback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	log, corr := h.reqLog(r)
	q := r.URL.Query()
	h.clearCookie(w, StateCookie, callbackPath)
	if ref := h.consumeState(ctx, log, r, q.Get("state")); ref != nil {
		ref.render(w)
		return
	}
	scopes, code, ref := granted(ctx, log, q)
	if ref != nil {
		ref.render(w)
		return
	}
	log, userID, ref := h.connect(ctx, log, corr, code, scopes)
	if ref != nil {
		ref.render(w)
		return
	}
	if ref := h.startSession(ctx, log, w, userID); ref != nil {
		ref.render(w)
		return
	}
	log.InfoContext(ctx, "signed in")
	h.ensureBackfill(ctx, log, userID, "strava connect")
	http.Redirect(w, r, "/", http.StatusFound)
}

// refusal is the page a sign-in step answers when it cannot go on; every
// such page offers to start again.
type refusal struct {
	status     int
	title, msg string
}

func (f *refusal) render(w http.ResponseWriter) { page(w, f.status, f.title, f.msg, true) }

var errSignInUnavailable = &refusal{http.StatusServiceUnavailable, "Sign-in is unavailable", "We could not save your sign-in. Please try again in a moment."}

// consumeState checks the callback's state and uses it up. It is checked
// before it is consumed: only the browser that started this login (the
// cookie) may use up its state, so a third party replaying a victim's state
// cannot void the victim's sign-in.
func (h *Handler) consumeState(ctx context.Context, log *slog.Logger, r *http.Request, state string) *refusal {
	if !respond.OpaqueID.MatchString(state) {
		return &refusal{http.StatusBadRequest, "Sign-in link not valid", "This sign-in link is not valid. Please start again."}
	}
	c, err := r.Cookie(StateCookie)
	if err != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(state)) != 1 {
		log.WarnContext(ctx, "login state not bound to this browser")
		return &refusal{http.StatusBadRequest, "Sign-in link not valid", "This sign-in was started in another browser. Please start again here."}
	}
	st, err := h.sessions.ConsumeOAuthState(ctx, keys.SessionHash(state))
	switch {
	case errors.Is(err, model.ErrNotFound):
		return &refusal{http.StatusBadRequest, "Sign-in link expired", "This sign-in link has expired or was already used. Please start again."}
	case err != nil:
		log.ErrorContext(ctx, "consume login state failed", "error", err)
		return &refusal{http.StatusServiceUnavailable, "Sign-in is unavailable", "We could not finish the sign-in. Please try again in a moment."}
	case st.Expired(h.now()):
		return &refusal{http.StatusBadRequest, "Sign-in link expired", "This sign-in link has expired. Please start again."}
	}
	return nil
}

// granted reads what the athlete granted at Strava: the scopes (an activity
// scope is required) and the authorization code.
func granted(ctx context.Context, log *slog.Logger, q url.Values) ([]string, string, *refusal) {
	if e := q.Get("error"); e != "" {
		if e == "access_denied" {
			return nil, "", &refusal{http.StatusForbidden, "Strava not connected", "You chose not to connect Strava, so nothing was saved. CommitCollect needs Strava to track your milestones."}
		}
		log.WarnContext(ctx, "strava authorize error", "stravaError", e)
		return nil, "", &refusal{http.StatusBadRequest, "Strava sign-in failed", "Strava did not complete the sign-in. Please try again."}
	}
	scopes := strava.ParseScopes(q.Get("scope"))
	if !hasActivityRead(scopes) {
		return nil, "", &refusal{http.StatusForbidden, "Permission needed",
			`CommitCollect needs permission to read your activities ("View data about your activities") to track milestones. Nothing was saved; please connect again and leave that box ticked.`}
	}
	code := q.Get("code")
	if code == "" {
		return nil, "", &refusal{http.StatusBadRequest, "Sign-in link not valid", "Strava did not send an authorization code. Please start again."}
	}
	return scopes, code, nil
}

// connect exchanges the code for the athlete's tokens and links the athlete
// to a user (the same user on a reconnect), returning the logger with both.
func (h *Handler) connect(ctx context.Context, log *slog.Logger, corr, code string, scopes []string) (*slog.Logger, string, *refusal) {
	tok, err := h.strava.Exchange(ctx, code)
	if err != nil {
		log.WarnContext(ctx, "strava code exchange failed", "error", err)
		return log, "", &refusal{http.StatusBadGateway, "Strava sign-in failed", "Strava did not accept the sign-in. Please try again."}
	}
	athlete, err := strava.AthleteFromToken(tok)
	if err != nil {
		log.WarnContext(ctx, "strava token without athlete", "error", err)
		return log, "", &refusal{http.StatusBadGateway, "Strava sign-in failed", "Strava did not say who you are. Please try again."}
	}
	log = log.With("athleteId", athlete.ID)
	userID, err := h.links.Link(ctx, log, corr, athlete, tok, scopes)
	if err != nil {
		log.ErrorContext(ctx, "link athlete failed", "error", err)
		return log, "", errSignInUnavailable
	}
	return log.With("userId", userID), userID, nil
}

// startSession stores a new session of userID and sets its cookie.
func (h *Handler) startSession(ctx context.Context, log *slog.Logger, w http.ResponseWriter, userID string) *refusal {
	now := h.now().UTC()
	cookie := model.NewID()
	sess := &model.Session{SessionID: keys.SessionHash(cookie), UserID: userID, CreatedAtUtc: now, ExpiresAtUtc: now.Add(h.cfg.SessionTTL).Unix()}
	if err := h.sessions.CreateSession(ctx, sess); err != nil {
		log.ErrorContext(ctx, "create session failed", "error", err)
		return errSignInUnavailable
	}
	h.setCookie(w, SessionCookie, cookie, "/", h.cfg.SessionTTL)
	return nil
}

// hasActivityRead reports whether the athlete granted an activity scope:
// either works (activity:read alone counts private activities as hidden);
// only neither is a refusal.
func hasActivityRead(scopes []string) bool { return strava.ActivityScope(scopes) != "" }

// logout deletes the session (if any) and clears the cookie. It always
// answers 204 so a stale cookie can always be dropped.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	log, _ := h.reqLog(r)
	if c, err := r.Cookie(SessionCookie); err == nil && respond.OpaqueID.MatchString(c.Value) {
		sess, err := h.sessions.Session(ctx, keys.SessionHash(c.Value))
		switch {
		case err == nil:
			if err := h.sessions.DeleteSession(ctx, sess.UserID, sess.SessionID); err != nil {
				respond.Fail(ctx, w, log.With("userId", sess.UserID), "logout", err)
				return
			}
		case !errors.Is(err, model.ErrNotFound):
			respond.Fail(ctx, w, log, "logout", err)
			return
		}
	}
	h.clearCookie(w, SessionCookie, "/")
	w.WriteHeader(http.StatusNoContent)
}

// authedFunc is a handler that runs with a valid session.
type authedFunc func(w http.ResponseWriter, r *http.Request, s model.Session, log *slog.Logger, corr string)

// authed resolves the session cookie and answers 401 JSON when it is
// missing, malformed, unknown or expired (TTL deletion is lazy, so expiry is
// checked here).
func (h *Handler) authed(next authedFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		log, corr := h.reqLog(r)
		c, err := r.Cookie(SessionCookie)
		if err != nil || !respond.OpaqueID.MatchString(c.Value) {
			respond.Error(w, http.StatusUnauthorized, respond.CodeUnauthorized, "sign in first")
			return
		}
		sess, err := h.sessions.Session(ctx, keys.SessionHash(c.Value))
		switch {
		case errors.Is(err, model.ErrNotFound):
			respond.Error(w, http.StatusUnauthorized, respond.CodeUnauthorized, "session not found, sign in again")
			return
		case err != nil:
			respond.Fail(ctx, w, log, "read session", err)
			return
		case sess.Expired(h.now()):
			respond.Error(w, http.StatusUnauthorized, respond.CodeUnauthorized, "session expired, sign in again")
			return
		}
		next(w, r, sess, log.With("userId", sess.UserID), corr)
	}
}
