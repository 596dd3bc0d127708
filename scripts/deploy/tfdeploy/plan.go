// Package tfdeploy is the logic of scripts/deploy: it drives terraform
// (hashicorp/terraform-exec) through init, a saved plan, a summary of that plan
// read as JSON (terraform-json), a refusal when stateful resources would be
// lost, the apply of exactly the saved plan, and the outputs with the Strava
// push-subscription command. Everything here works on *tfjson.Plan values and
// a narrow Terraform interface, so it is tested without AWS.
package tfdeploy

import (
	"fmt"
	"io"
	"slices"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"
)

// StatefulTypes are resource types that hold data: destroying or replacing
// one loses it (tables), loses parked records (DLQs), or makes it
// unreadable (the KMS key sealing every Strava token and the athlete-hash
// key: a destroyed key cannot open them again).
var StatefulTypes = []string{"aws_dynamodb_table", "aws_sqs_queue", "aws_kms_key"}

// Change is one planned change of a managed resource.
type Change struct {
	Address string
	Type    string
}

// Summary groups a plan's managed-resource changes by what happens to them.
type Summary struct {
	Creates  []Change
	Updates  []Change
	Replaces []Change // destroy-and-create, in either order
	Destroys []Change
	Forgets  []Change // removed from state, left in AWS
}

// Summarize reads a plan's resource changes. Data-source reads and no-ops
// are not changes. A nil plan summarizes to nothing.
func Summarize(p *tfjson.Plan) Summary {
	var s Summary
	if p == nil {
		return s
	}
	for _, rc := range p.ResourceChanges {
		if rc == nil || rc.Change == nil || rc.Mode != tfjson.ManagedResourceMode {
			continue
		}
		c := Change{Address: rc.Address, Type: rc.Type}
		a := rc.Change.Actions
		switch {
		case a.Replace():
			s.Replaces = append(s.Replaces, c)
		case a.Create():
			s.Creates = append(s.Creates, c)
		case a.Update():
			s.Updates = append(s.Updates, c)
		case a.Delete():
			s.Destroys = append(s.Destroys, c)
		case a.Forget():
			s.Forgets = append(s.Forgets, c)
		}
	}
	return s
}

// Empty reports whether the plan changes nothing.
func (s Summary) Empty() bool {
	return len(s.Creates)+len(s.Updates)+len(s.Replaces)+len(s.Destroys)+len(s.Forgets) == 0
}

// Dangerous returns the stateful resources (StatefulTypes) the plan would
// destroy or replace.
func (s Summary) Dangerous() []Change {
	var out []Change
	for _, c := range append(slices.Clone(s.Replaces), s.Destroys...) {
		if slices.Contains(StatefulTypes, c.Type) {
			out = append(out, c)
		}
	}
	return out
}

// Write prints the summary: one count line, then every change by kind.
func (s Summary) Write(w io.Writer) {
	fmt.Fprintf(w, "Plan: %d to create, %d to update, %d to replace, %d to destroy", len(s.Creates), len(s.Updates), len(s.Replaces), len(s.Destroys))
	if len(s.Forgets) > 0 {
		fmt.Fprintf(w, ", %d to forget", len(s.Forgets))
	}
	fmt.Fprintln(w, ".")
	for _, g := range []struct {
		sign    string
		changes []Change
	}{{"+", s.Creates}, {"~", s.Updates}, {"-/+", s.Replaces}, {"-", s.Destroys}, {"forget", s.Forgets}} {
		for _, c := range g.changes {
			fmt.Fprintf(w, "  %-6s %s\n", g.sign, c.Address)
		}
	}
}

// Counts returns how many resources of each type the plan creates, e.g.
// "aws_dynamodb_table" → 4; scripts and the README use it to describe a plan.
func (s Summary) Counts() map[string]int {
	out := map[string]int{}
	for _, c := range s.Creates {
		out[c.Type]++
	}
	return out
}

// addresses joins change addresses for an error message.
func addresses(cs []Change) string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Address
	}
	return strings.Join(out, ", ")
}
