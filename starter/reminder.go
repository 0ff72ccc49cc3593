package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"
)

// reminderRow is a bot's reminder as `starter reminder` prints it.
type reminderRow struct {
	AccountKey   string `json:"account_key"`
	On           bool   `json:"on"`
	BeforeSecond int64  `json:"before_seconds,omitempty"`
	Text         string `json:"text,omitempty"`
}

func reminderCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs, c := commandFlags("reminder", help{
		"reminder --account KEY (--before DURATION --text TEXT | --off) [flags]",
		"Turns a bot's reminder before a window closes on or off (off by default). While it is on, every reply window of the bot " +
			"keeps its last send for the reminder, and a conversation that holds replies (its window's quota was used up) gets TEXT once, " +
			"DURATION before the window ends, inviting the user to write again; the held replies go first when they do.",
		"starter reminder --account ilk_0123abcd --before 2h --text \"I have more for you: send me any message to get it.\"\n" +
			"starter reminder --account ilk_0123abcd --off"},
		withDB|withJSON, stderr, getenv)
	account := fs.String("account", "", "the bot's account key (required)")
	before := fs.Duration("before", 0, "how long before the window ends the reminder goes (whole seconds, less than the window's lifetime)")
	text := fs.String("text", "", "the reminder's text (at most 2048 bytes of UTF-8)")
	off := fs.Bool("off", false, "turn the reminder off")
	help, rest, err := parseArgs(fs, args, stdout)
	if help || err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case len(rest) != 0:
		return usagef("reminder takes no argument (got %q)", rest[0])
	case *account == "":
		return usagef("reminder: --account is required")
	case *off && (set["before"] || set["text"]):
		return usagef("reminder: --off takes neither --before nor --text")
	case !*off && (*before <= 0 || *text == ""):
		return usagef("reminder: give --before and --text, or --off")
	}
	st, closeFn, err := openStore(ctx, c, getenv)
	if err != nil {
		return err
	}
	defer closeFn()
	if *off {
		*before, *text = 0, ""
	}
	a, err := st.SetReminder(ctx, time.Now(), *account, *before, *text)
	if err != nil {
		return err
	}
	row := reminderRow{AccountKey: a.AccountKey, On: a.RemindBefore > 0, BeforeSecond: int64(a.RemindBefore / time.Second), Text: a.ReminderText}
	if c.json {
		return printJSON(stdout, row)
	}
	if !row.On {
		fmt.Fprintf(stdout, "reminder of %s is off\n", a.AccountKey)
		return nil
	}
	fmt.Fprintf(stdout, "reminder of %s is on: %s before a window ends, when its conversation holds replies\n", a.AccountKey, a.RemindBefore)
	return nil
}
