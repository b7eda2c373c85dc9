package main

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/iwf-server/iwf-server/iwftest"
	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

// outbox records the subjects of the emails sent.
type outbox struct {
	mu   sync.Mutex
	sent []string
}

func (o *outbox) Send(_ context.Context, _, subject string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sent = append(o.sent, subject)
	return nil
}

func (o *outbox) Count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.sent)
}

const email = "ann@example.com"

// startSignUp starts a sign-up on the fake clock and waits until it waits
// for the verification.
func startSignUp(t *testing.T) (*iwftest.Env, *outbox) {
	t.Helper()
	mails := &outbox{}
	wf := NewSignUpWorkflow(mails)
	registry, err := iwf.NewRegistry(wf)
	if err != nil {
		t.Fatal(err)
	}
	env := iwftest.New(t, registry, iwftest.WithFakeClock())
	if _, err := env.Client().StartWorkflow(t.Context(), wf, "signup", 0, email, nil); err != nil {
		t.Fatal(err)
	}
	env.WaitIdle()
	if n := mails.Count(); n != 1 {
		t.Fatalf("after the start: %d emails, want the verification email", n)
	}
	return env, mails
}

func result(t *testing.T, env *iwftest.Env) Result {
	t.Helper()
	res, err := iwf.GetSimpleWorkflowResult[Result](t.Context(), env.Client(), "signup", "")
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestVerifiedAfterOneReminder(t *testing.T) {
	t.Parallel()
	env, mails := startSignUp(t)

	env.Advance(ReminderInterval) // a day without a click: one reminder
	if n := mails.Count(); n != 2 {
		t.Fatalf("after a day: %d emails, want 2", n)
	}
	if err := env.Client().SignalWorkflow(t.Context(), "signup", "", VerifiedChannel, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := result(t, env), (Result{Email: email, Verified: true, Reminders: 1}); got != want {
		t.Fatalf("result %+v, want %+v", got, want)
	}
}

func TestGivesUpAfterMaxReminders(t *testing.T) {
	t.Parallel()
	env, mails := startSignUp(t)

	env.Advance(MaxReminders * ReminderInterval) // three days, three reminders
	info, err := env.Client().DescribeWorkflow(t.Context(), "signup", "")
	if err != nil || info.Status != iwf.StatusRunning {
		t.Fatalf("after %d reminders: %+v, %v; want RUNNING", MaxReminders, info, err)
	}
	env.Advance(ReminderInterval) // the fourth day: give up
	if got, want := result(t, env), (Result{Email: email, Reminders: MaxReminders}); got != want {
		t.Fatalf("result %+v, want %+v", got, want)
	}
	mails.mu.Lock()
	defer mails.mu.Unlock()
	want := []string{"Please verify your email address"}
	for range MaxReminders {
		want = append(want, "Reminder: please verify your email address")
	}
	if !slices.Equal(mails.sent, want) {
		t.Fatalf("emails %q, want %q", mails.sent, want)
	}
}
