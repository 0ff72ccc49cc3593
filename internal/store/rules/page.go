package rules

import "github.com/ilinkflow/ilinkflow/vocab"

// ReasonSuperseded is the retired reason of a window whose message a newer one of the
// same conversation replaced.
const ReasonSuperseded = "superseded_by_newer_message"

// WindowPlace is the state a new message's reply window ends its page in.
type WindowPlace struct {
	// State is open (the message owns the conversation's open window) or superseded.
	State string
	// RetiredReason is ReasonSuperseded for a window the page opened and then replaced
	// with a newer message's; "" for one born superseded (no context token kept).
	RetiredReason string
}

// Placement is where a page leaves the conversation's windows (PlaceWindows).
type Placement struct {
	// Windows holds the place of each new message's window, in the order given.
	Windows []WindowPlace
	// RetireOpen: the window open before the page is retired as superseded.
	RetireOpen bool
	// Owner is the index of the new message that owns the open window after the page
	// (the deliverable), or -1 when the window open before the page stays open or no
	// message is new.
	Owner int
}

// PlaceWindows gives each new message's window its state, taking the messages in page
// order: a message opens its window when the conversation has no open window (open is
// nil) or it is newer than the open one (Supersedes), and the window it replaces is
// retired as superseded; otherwise its window is born superseded. open is the order of
// the message owning the conversation's open window before the page.
func PlaceWindows(open *OrderKey, news []OrderKey) Placement {
	p := Placement{Windows: make([]WindowPlace, len(news)), Owner: -1}
	var cur OrderKey
	if open != nil {
		cur = *open
	}
	for i, n := range news {
		if (open != nil || p.Owner >= 0) && !Supersedes(n, cur, p.Owner >= 0) {
			p.Windows[i].State = vocab.WindowSuperseded
			continue
		}
		switch {
		case p.Owner >= 0:
			p.Windows[p.Owner] = WindowPlace{State: vocab.WindowSuperseded, RetiredReason: ReasonSuperseded}
		case open != nil:
			p.RetireOpen = true
		}
		p.Windows[i].State = vocab.WindowOpen
		p.Owner, cur = i, n
	}
	return p
}
