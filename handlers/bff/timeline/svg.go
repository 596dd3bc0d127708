package timeline

import (
	"fmt"
	"strings"
	"time"

	"github.com/commitcollect/backend/model/calendar"
)

// Chart is a timeline as the landing page draws it in SVG, in a viewBox of
// ChartWidth × ChartHeight: the value as a rising step line against the
// pace line (from nothing on the first day to the target after the last),
// or a streak's last days as cells, active or bridged.
type Chart struct {
	// Value and Pace are polyline points ("x,y x,y"); Pace is empty when
	// the period has no end.
	Value, Pace string
	// Cells are a streak's days, oldest first (none for other metrics).
	Cells []Cell
	// Label says what the chart shows, for screen readers.
	Label string
}

// Cell is one day of a streak's chart.
type Cell struct {
	X, W  float64
	Class string // active, bridged, or rest
}

// The chart's viewBox, and how many of a streak's last days it shows.
const (
	ChartWidth     = 300
	ChartHeight    = 80
	maxStreakCells = 90
)

// ChartOf draws b up to today (the athlete's local day).
func ChartOf(b Body, today time.Time) Chart {
	first, err := calendar.ParseDate(b.StartDate)
	if err != nil {
		return Chart{Label: "no timeline"}
	}
	last := today
	if b.EndDate != nil {
		if end, err := calendar.ParseDate(*b.EndDate); err == nil {
			last = end
		}
	}
	if b.Metric == "streak" {
		return streakChart(b, first, today)
	}
	span := max(last.Sub(first).Hours()/24+1, 1)
	x := func(day time.Time) float64 { return ChartWidth * min(max(day.Sub(first).Hours()/24/span, 0), 1) }
	top := b.Target
	for _, d := range b.Days {
		top = max(top, d.Value)
	}
	y := func(v float64) float64 { return ChartHeight * (1 - v/max(top, 1)) }
	pts := []string{point(0, y(0))}
	prev := 0.0
	for _, d := range b.Days {
		day, err := calendar.ParseDate(d.Date)
		if err != nil {
			continue
		}
		pts = append(pts, point(x(day), y(prev)), point(x(day), y(d.Value)))
		prev = d.Value
	}
	end := today.AddDate(0, 0, 1)
	if last.Before(today) {
		end = last.AddDate(0, 0, 1)
	}
	pts = append(pts, point(x(end), y(prev)))
	c := Chart{Value: strings.Join(pts, " "), Label: fmt.Sprintf("%d days with progress", len(b.Days))}
	if b.EndDate != nil {
		c.Pace = point(0, y(0)) + " " + point(ChartWidth, y(b.Target))
		c.Label += ", against the pace line"
	}
	return c
}

// streakChart draws a streak's last days up to today as cells.
func streakChart(b Body, first, today time.Time) Chart {
	from := today.AddDate(0, 0, 1-maxStreakCells)
	if from.Before(first) {
		from = first
	}
	n := int(today.Sub(from).Hours()/24) + 1
	if n < 1 {
		return Chart{Label: "the streak has not begun"}
	}
	kinds := map[string]string{}
	for _, d := range b.Days {
		kinds[d.Date] = d.Kind
	}
	c := Chart{Label: fmt.Sprintf("the last %d days: active and bridged", n)}
	w := float64(ChartWidth) / float64(n)
	for i := range n {
		class := kinds[calendar.FormatDate(from.AddDate(0, 0, i))]
		if class == "" {
			class = "rest"
		}
		c.Cells = append(c.Cells, Cell{X: w * float64(i), W: w, Class: class})
	}
	return c
}

func point(x, y float64) string { return fmt.Sprintf("%.1f,%.1f", x, y) }
