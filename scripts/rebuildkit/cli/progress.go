package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/commitcollect/backend/scripts/rebuildkit"
)

// IsTerminal reports whether f is a character device (a terminal), where a
// redrawn progress bar makes sense; pipes and files get plain lines.
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Progress reports a run's progress: a bar redrawn in place with an ETA on a
// terminal, plain lines at a slower pace otherwise. It is used from one
// goroutine.
type Progress struct {
	w     io.Writer
	tty   bool
	label string
	// Every is the minimum time between two reports (default 200ms on a
	// terminal, 5s otherwise).
	Every time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time

	total, base       int
	processed, errors int
	changed           int
	started, last     time.Time
}

// NewProgress reports to w, as a bar when tty is true.
func NewProgress(w io.Writer, tty bool, label string) *Progress {
	p := &Progress{w: w, tty: tty, label: label, Now: time.Now, Every: 5 * time.Second}
	if tty {
		p.Every = 200 * time.Millisecond
	}
	return p
}

// Start begins the clock: total users overall (0 when unknown), of which
// alreadyDone were completed by earlier runs.
func (p *Progress) Start(total, alreadyDone int) {
	p.total, p.base = total, alreadyDone
	p.started = p.Now()
	p.last = p.started
	p.render(false)
}

// Update reports processed users of this run (errors among them, and
// milestones changed so far); it draws only when Every has passed.
func (p *Progress) Update(processed, errors, changed int) {
	p.processed, p.errors, p.changed = processed, errors, changed
	if now := p.Now(); now.Sub(p.last) >= p.Every {
		p.last = now
		p.render(false)
	}
}

// Finish draws the final state and ends the bar's line.
func (p *Progress) Finish(sum rebuildkit.Summary) {
	p.processed, p.errors, p.changed = sum.Users+sum.Errors, sum.Errors, sum.MilestonesChanged
	p.render(true)
}

func (p *Progress) render(final bool) {
	line := RenderProgress(p.tty, p.label, p.base+p.processed, p.total, p.processed, p.errors, p.changed, p.Now().Sub(p.started))
	if p.tty {
		end := ""
		if final {
			end = "\n"
		}
		fmt.Fprintf(p.w, "\r%s\x1b[K%s", line, end)
		return
	}
	fmt.Fprintln(p.w, line)
}

const barWidth = 30

// RenderProgress renders one progress report: done of total users (total 0:
// unknown), ranThisRun of them by this run in elapsed (for the rate and the
// ETA), with errors and milestones changed. With bar it is a bar for a
// terminal, otherwise a plain key=value line.
func RenderProgress(bar bool, label string, done, total, ranThisRun, errors, changed int, elapsed time.Duration) string {
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(ranThisRun) / s
	}
	eta := "?"
	switch {
	case total > 0 && done >= total:
		eta = "0s"
	case total > 0 && rate > 0:
		eta = (time.Duration(float64(total-done) / rate * float64(time.Second))).Round(time.Second).String()
	}
	pct := ""
	if total > 0 {
		pct = fmt.Sprintf("%3.0f%%", 100*float64(min(done, total))/float64(total))
	}
	of := fmt.Sprint(done)
	if total > 0 {
		of = fmt.Sprintf("%d/%d", done, total)
	}
	if !bar {
		line := fmt.Sprintf("%s: users=%s", label, of)
		if pct != "" {
			line += " (" + strings.TrimSpace(pct) + ")"
		}
		return fmt.Sprintf("%s changed=%d errors=%d rate=%.1f/s eta=%s", line, changed, errors, rate, eta)
	}
	filled := 0
	if total > 0 {
		filled = min(done, total) * barWidth / total
	}
	return fmt.Sprintf("%s [%s%s] %s %s  changed %d  errors %d  %.1f/s  ETA %s", label,
		strings.Repeat("#", filled), strings.Repeat("-", barWidth-filled), of, pct, changed, errors, rate, eta)
}
