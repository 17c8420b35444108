package card

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// colourInput is the AskUserQuestion input recorded from claude 2.1.330
// (testdata/claude/ask_user_question.jsonl).
const colourInput = `{"questions":[{"question":"Which colour should the button be?","header":"Colour","options":[{"label":"Blue","description":"Matches the logo"},{"label":"Green","description":"Reads as go"}],"multiSelect":false}]}`

func TestParseQuestions(t *testing.T) {
	got, err := ParseQuestions(json.RawMessage(colourInput))
	if err != nil {
		t.Fatal(err)
	}
	want := []Question{{Text: "Which colour should the button be?", Header: "Colour",
		Options: []Option{{"Blue", "Matches the logo"}, {"Green", "Reads as go"}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseQuestions (-want +got):\n%s", diff)
	}
	for _, bad := range []string{`{}`, `{"questions":[{"question":"  "}]}`, `[]`, `nope`} {
		if _, err := ParseQuestions(json.RawMessage(bad)); err == nil {
			t.Errorf("ParseQuestions(%s) = nil error", bad)
		} else if bad == `{}` && !errors.Is(err, ErrNoQuestions) {
			t.Errorf("ParseQuestions({}) = %v, want ErrNoQuestions", err)
		}
	}
}

func TestRenderQuestions(t *testing.T) {
	qs, _ := ParseQuestions(json.RawMessage(colourInput))
	multi := Question{Text: "What should I add?", Header: "Extras", Multi: true,
		Options: []Option{{"Tests", "Unit tests"}, {"Docs", ""}}}
	for _, tc := range []struct {
		name string
		q    Questions
		want []string
		not  []string
	}{
		{"asking", Questions{Questions: qs, Asker: "42", Timeout: 10 * time.Minute},
			[]string{"❓ <@42>, the agent has a question:", "> **Colour** · Which colour should the button be?",
				"1. Blue — Matches the logo", "2. Green — Reads as go", "within 10m 00s, the agent goes on without an answer"},
			[]string{"Pick one or more"}},
		{"two, one answered", Questions{Questions: append(qs, multi), Answers: []string{"Green", ""}},
			[]string{"the agent has 2 questions:", "→ Green", "1. Tests — Unit tests", "2. Docs\n", "-# Pick one or more."},
			[]string{"1. Blue"}},
		{"answered", Questions{Phase: QuestionAnswered, By: "7", Questions: append(qs, multi), Answers: []string{"Blue", "Tests, Docs"}},
			[]string{"✅ Answered by <@7>:", "→ Blue", "→ Tests, Docs"}, []string{"1. Blue", "within"}},
		{"timed out", Questions{Phase: QuestionTimedOut, Questions: qs, Timeout: time.Minute},
			[]string{"⌛ Nobody answered in time", "→ (no answer)"}, []string{"within"}},
		{"markdown and mentions in the model's text", Questions{Questions: []Question{{Text: "Ping @everyone **now**?", Options: []Option{{"a_b", ""}}}}},
			[]string{"@\u200beveryone", `\*\*now\*\*`, `a\_b`}, []string{"@everyone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RenderQuestions(tc.q)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("RenderQuestions =\n%s\nwant it to contain %q", got, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(got, w) {
					t.Errorf("RenderQuestions =\n%s\nwant no %q", got, w)
				}
			}
		})
	}
}

func TestRenderPlan(t *testing.T) {
	short := "# Plan\n\n1. Write hello.txt\n2. Say done."
	long := strings.Repeat("- a step of the plan that goes on\n", 60)
	for _, tc := range []struct {
		name string
		p    Plan
		want []string
		not  []string
	}{
		{"asking inline", Plan{Text: short, Asker: "42", Timeout: 10 * time.Minute},
			[]string{"📋 <@42>, the agent has a plan.", "> # Plan\n> \n> 1. Write hello.txt\n> 2. Say done.", "within 10m 00s"},
			[]string{"attached"}},
		{"asking attached", Plan{Text: long, Attached: PlanAttached(long)},
			[]string{"attached as plan.md", "> - a step of the plan"}, nil},
		{"approved", Plan{Phase: PlanApproved, By: "7", Mode: "acceptEdits", Text: short},
			[]string{"✅ Plan approved by <@7>; the agent carries it out (permission mode `acceptEdits`).", "Write hello.txt"}, []string{"within"}},
		{"sent back", Plan{Phase: PlanRevising, By: "7", Note: "Add a test step.", Text: short},
			[]string{"📝 Sent back by <@7>", "Note: Add a test step."}, nil},
		{"no text", Plan{}, []string{"could not be shown"}, nil},
		{"timed out", Plan{Phase: PlanTimedOut, Text: short}, []string{"⌛ Nobody answered in time; the plan was not approved"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RenderPlan(tc.p)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("RenderPlan =\n%s\nwant it to contain %q", got, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(got, w) {
					t.Errorf("RenderPlan =\n%s\nwant no %q", got, w)
				}
			}
		})
	}
	if PlanAttached(short) || !PlanAttached(long) {
		t.Error("PlanAttached: want the short plan inline and the long one attached")
	}
}

// Whatever the model asks, the messages stay within Discord's limit.
func TestQuestionAndPlanWithinLimits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	text := func(n int) string {
		var b strings.Builder
		for range r.IntN(n) {
			runes := []rune("ab \n*_`@é😀")
			b.WriteRune(runes[r.IntN(len(runes))])
		}
		return b.String()
	}
	for range 300 {
		var q Questions
		for range 1 + r.IntN(6) {
			qu := Question{Text: "x" + text(800), Header: text(60), Multi: r.IntN(2) == 0}
			for range r.IntN(6) {
				qu.Options = append(qu.Options, Option{Label: text(200), Description: text(400)})
			}
			q.Questions = append(q.Questions, qu)
			q.Answers = append(q.Answers, text(600))
		}
		q.Phase, q.Asker, q.Timeout = QuestionPhase(r.IntN(4)), "1234567890123456789", time.Hour
		if got := RenderQuestions(q); utf8.RuneCountInString(got) > 2000 || !utf8.ValidString(got) {
			t.Fatalf("RenderQuestions: %d characters", utf8.RuneCountInString(got))
		}
		p := Plan{Phase: PlanPhase(r.IntN(5)), Text: text(5000), Note: text(4000), By: "1", Asker: "2", Timeout: time.Hour, Mode: text(30)}
		p.Attached = PlanAttached(p.Text)
		if got := RenderPlan(p); utf8.RuneCountInString(got) > 2000 || !utf8.ValidString(got) {
			t.Fatalf("RenderPlan: %d characters", utf8.RuneCountInString(got))
		}
	}
}
