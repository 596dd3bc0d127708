package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/commitcollect/backend/model"
	"github.com/commitcollect/backend/model/keys"
	"github.com/commitcollect/backend/model/store"
	"github.com/commitcollect/backend/model/streams"
	"github.com/commitcollect/backend/scripts/rebuildkit"
	"github.com/commitcollect/backend/scripts/rebuildkit/redrive"
)

// Env is what the commands work with, built once from the environment by
// the wiring (scripts/rebuildkit/wire): DynamoDB Local when DYNAMODB_ENDPOINT
// is set, AWS with the default credential chain otherwise.
type Env struct {
	Store *store.Adapters
	// Streams reads the main table's stream; StreamARN finds it.
	Streams   streams.API
	StreamARN func(ctx context.Context) (string, error)
	// Recompute and Projector are the projector (projections/consumer):
	// RecomputeUser and Handle.
	Recompute rebuildkit.Recompute
	Projector streams.Handler
	// Lambda and SQS reach deployed functions and dead-letter queues.
	Lambda rebuildkit.LambdaAPI
	SQS    redrive.SQSAPI
	// ProcessJob is the in-process worker (nil when not wired).
	ProcessJob rebuildkit.ProcessJob
	Logger     *slog.Logger
}

// Setup builds the Env for a table prefix.
type Setup func(ctx context.Context, tablePrefix string) (*Env, error)

// Exit codes of the commands.
const (
	ExitOK    = 0
	ExitDrift = 1 // verify found drift
	ExitError = 2 // a user or record failed, bad flags, or the run could not go on
)

// IO is where a command writes: results to Out, progress, warnings and
// logs to Err.
type IO struct {
	Out, Err io.Writer
}

func (o IO) isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && IsTerminal(f)
}

// userList is a repeatable --user flag.
type userList []string

func (u *userList) String() string { return strings.Join(*u, ",") }
func (u *userList) Set(v string) error {
	for _, id := range strings.Split(v, ",") {
		if id = strings.TrimSpace(id); id != "" {
			*u = append(*u, id)
		}
	}
	return nil
}

// targetFlags are the --user / --users-file / --all flags.
type targetFlags struct {
	users     userList
	usersFile string
	all       bool
}

func (t *targetFlags) register(fs *flag.FlagSet) {
	fs.Var(&t.users, "user", "a user id (repeatable, or comma-separated)")
	fs.StringVar(&t.usersFile, "users-file", "", "a file of user ids, one per line (# comments and blank lines ignored)")
	fs.BoolVar(&t.all, "all", false, "every user, listed through the sparse users index (GSI2), never a Scan")
}

func (t *targetFlags) target() (rebuildkit.Target, error) {
	tg := rebuildkit.Target{All: t.all, UserIDs: append([]string(nil), t.users...)}
	if t.usersFile != "" {
		ids, err := ReadUsersFile(t.usersFile)
		if err != nil {
			return rebuildkit.Target{}, err
		}
		tg.UserIDs = append(tg.UserIDs, ids...)
	}
	return tg, tg.Validate()
}

// ReadUsersFile reads one user id per line, skipping blank lines and lines
// starting with #. It returns an error matching model.ErrInvalid for a line
// that is not a plain id.
func ReadUsersFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read users file: %w", err)
	}
	defer f.Close()
	var ids []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.ContainsAny(line, " \t,") || strings.Contains(line, keys.PrefixUser) {
			return nil, fmt.Errorf("users file %s line %d: %q is not a user id: %w", path, n, line, model.ErrInvalid)
		}
		ids = append(ids, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read users file %s: %w", path, err)
	}
	return ids, nil
}

func newFlagSet(name, synopsis string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "%s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
		fmt.Fprint(out, "\nEnvironment: DYNAMODB_ENDPOINT (e.g. http://localhost:8000 for DynamoDB Local; unset: AWS with the\n"+
			"default credential chain, AWS_PROFILE / AWS_REGION), CC_TABLE_PREFIX (default of --table-prefix), CC_LOG_LEVEL.\n")
	}
	return fs
}

func tablePrefixFlag(fs *flag.FlagSet) *string {
	return fs.String("table-prefix", os.Getenv("CC_TABLE_PREFIX"), "prefix of the table names, e.g. dev- for dev-CommitCollect (default $CC_TABLE_PREFIX)")
}

// parse parses args; it returns (exit code, false) when the command must
// stop (help or bad flags).
func parse(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK, false
		}
		return ExitError, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %v\n", fs.Args())
		fs.Usage()
		return ExitError, false
	}
	return 0, true
}

const rebuildSynopsis = `rebuild: recompute milestone progress, awards and status from the workout log, and write what differs
(the projector's own code, with its optimistic version check), for one user, a list, or every user.

  rebuild --user ID [--user ID…] | --users-file FILE | --all  [--concurrency N] [--rps R] [--state FILE]

Never mints past what is justified: a part counts when the log earns it or its award item has its AWARD_MINTED
audit entry; an awardedParts raised beyond that (no award item backs it) is lowered, and verify reports it.

Resumable: with --state, completed users and the users-index cursor are saved; running the same command
again after a kill or Ctrl-C continues where it stopped and never redoes a completed user (a recompute is
idempotent anyway). Prints a progress bar with ETA on a terminal, plain lines otherwise, and a summary.
Exit status: 0 done, 2 if any user failed (they are named, and retried first by a re-run with --state).`

// RebuildMain is the rebuild command.
func RebuildMain(ctx context.Context, args []string, std IO, setup Setup) int {
	fs := newFlagSet("rebuild", rebuildSynopsis, std.Err)
	var tf targetFlags
	tf.register(fs)
	prefix := tablePrefixFlag(fs)
	conc := fs.Int("concurrency", 4, "users recomputed at once")
	rps := fs.Float64("rps", 20, "at most this many users started per second (0: unlimited); each user costs a few reads and writes")
	state := fs.String("state", "", "state file that makes the run resumable (re-run with the same file to continue)")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	target, err := tf.target()
	if err != nil {
		fmt.Fprintln(std.Err, "rebuild:", err)
		return ExitError
	}
	env, err := setup(ctx, *prefix)
	if err != nil {
		fmt.Fprintln(std.Err, "rebuild:", err)
		return ExitError
	}
	r := &rebuildkit.Runner{Recompute: env.Recompute, Users: env.Store.Users, Concurrency: *conc, Limiter: rebuildkit.NewLimiter(*rps),
		StatePath: *state, Progress: NewProgress(std.Out, std.isTerminal(std.Out), "rebuild"), Logger: env.Logger}
	if *asJSON {
		r.Progress = NewProgress(std.Err, std.isTerminal(std.Err), "rebuild")
	}
	sum, err := r.Run(ctx, target)
	printSummary(std.Out, "rebuild", sum, *asJSON)
	if err != nil {
		fmt.Fprintln(std.Err, "rebuild:", err)
		if *state != "" {
			fmt.Fprintf(std.Err, "rebuild: progress saved in %s; run the same command again to continue\n", *state)
		}
		return ExitError
	}
	if sum.Errors > 0 {
		return ExitError
	}
	return ExitOK
}

func printSummary(w io.Writer, name string, sum rebuildkit.Summary, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(sum)
		return
	}
	for _, u := range slices.Sorted(maps.Keys(sum.Failures)) {
		fmt.Fprintf(w, "%s: user %s failed: %s\n", name, u, sum.Failures[u])
	}
	fmt.Fprintf(w, "%s: %s\n", name, sum)
}

const verifySynopsis = `verify: recompute milestones from the workout log without writing anything, and print every milestone
whose stored progress, workouts counted, awarded parts, status or award items differ from the log
(awardedParts beyond what the log or audited awards justify is reported with an explanation).

  verify --user ID [--user ID…] | --users-file FILE | --all  [--json] [--concurrency N] [--rps R]

Exit status: 0 no drift, 1 drift found (restore it with rebuild), 2 a user could not be verified.`

// VerifyReport is verify's JSON output.
type VerifyReport struct {
	// Clean is true when every user was verified and nothing drifts.
	Clean bool `json:"clean"`
	// Drift lists every drifting value, sorted by user, milestone, field.
	Drift []rebuildkit.Drift `json:"drift"`
	// Summary counts users, milestones and errors (its own Drift is empty).
	Summary rebuildkit.Summary `json:"summary"`
}

// VerifyMain is the verify command.
func VerifyMain(ctx context.Context, args []string, std IO, setup Setup) int {
	fs := newFlagSet("verify", verifySynopsis, std.Err)
	var tf targetFlags
	tf.register(fs)
	prefix := tablePrefixFlag(fs)
	conc := fs.Int("concurrency", 4, "users recomputed at once")
	rps := fs.Float64("rps", 20, "at most this many users started per second (0: unlimited)")
	asJSON := fs.Bool("json", false, "print the result as JSON on stdout")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	target, err := tf.target()
	if err != nil {
		fmt.Fprintln(std.Err, "verify:", err)
		return ExitError
	}
	env, err := setup(ctx, *prefix)
	if err != nil {
		fmt.Fprintln(std.Err, "verify:", err)
		return ExitError
	}
	r := &rebuildkit.Runner{Recompute: env.Recompute, Users: env.Store.Users, DryRun: true, Concurrency: *conc, Limiter: rebuildkit.NewLimiter(*rps), Logger: env.Logger}
	if !*quiet {
		r.Progress = NewProgress(std.Err, std.isTerminal(std.Err), "verify")
	}
	sum, err := r.Run(ctx, target)
	if *asJSON {
		rep := VerifyReport{Clean: len(sum.Drift) == 0 && sum.Errors == 0 && err == nil, Drift: sum.Drift, Summary: sum}
		if rep.Drift == nil {
			rep.Drift = []rebuildkit.Drift{}
		}
		rep.Summary.Drift = nil
		enc := json.NewEncoder(std.Out)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		for _, d := range sum.Drift {
			fmt.Fprintf(std.Out, "drift: %s\n", d)
		}
		printSummary(std.Out, "verify", sum, false)
	}
	switch {
	case err != nil:
		fmt.Fprintln(std.Err, "verify:", err)
		return ExitError
	case sum.Errors > 0:
		return ExitError
	case len(sum.Drift) > 0:
		return ExitDrift
	}
	return ExitOK
}
