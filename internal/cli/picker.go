package cli

import (
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"
)

// pickerRows is how many choices a picker shows at once.
const pickerRows = 8

// picker chooses one of a few items in place of the input line: typing
// filters, Up and Down move, Enter picks, Esc or Ctrl-C cancels.
type picker struct {
	title  string
	items  []pickItem
	filter string
	cursor int
	// pick is called with the chosen item.
	pick func(pickItem) tea.Cmd
}

// pickItem is one choice: the line shown and the value it stands for.
type pickItem struct {
	label string
	value string
}

// visible returns the items that match the filter.
func (p *picker) visible() []pickItem {
	if p.filter == "" {
		return p.items
	}
	var out []pickItem
	f := strings.ToLower(p.filter)
	for _, it := range p.items {
		if strings.Contains(strings.ToLower(it.label), f) {
			out = append(out, it)
		}
	}
	return out
}

// key handles a key; done reports that the picker closed, with the pick's
// command or nil when cancelled.
func (p *picker) key(k tea.KeyPressMsg) (done bool, cmd tea.Cmd) {
	vis := p.visible()
	switch k.String() {
	case "esc", "ctrl+c":
		return true, nil
	case "enter":
		if len(vis) == 0 {
			return false, nil
		}
		return true, p.pick(vis[min(p.cursor, len(vis)-1)])
	case "up", "ctrl+p":
		p.cursor = max(p.cursor-1, 0)
	case "down", "ctrl+n":
		p.cursor = min(p.cursor+1, max(len(vis)-1, 0))
	case "backspace":
		if p.filter != "" {
			r := []rune(p.filter)
			p.filter, p.cursor = string(r[:len(r)-1]), 0
		}
	default:
		if t := k.Key().Text; t != "" {
			p.filter, p.cursor = p.filter+t, 0
		}
	}
	return false, nil
}

// view draws the picker: its title and filter, then a window of items
// around the cursor.
func (p *picker) view() string {
	vis := p.visible()
	var b strings.Builder
	fmt.Fprintf(&b, "%s (type to filter, Enter picks, Esc cancels): %s\n", p.title, p.filter)
	if len(vis) == 0 {
		b.WriteString("  (nothing matches)")
		return b.String()
	}
	start := max(0, min(p.cursor-pickerRows/2, len(vis)-pickerRows))
	for i := start; i < min(len(vis), start+pickerRows); i++ {
		mark := "  "
		if i == p.cursor {
			mark = "> "
		}
		b.WriteString(mark + vis[i].label)
		if i < min(len(vis), start+pickerRows)-1 {
			b.WriteByte('\n')
		}
	}
	return b.String()
}
