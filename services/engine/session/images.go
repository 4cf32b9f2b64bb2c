package session

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/scratchpad"
)

// imageMessages returns the messages that carry a message's images (a
// prompt's or a steering message's) to the model. A model with vision gets
// each image itself. A text-only model cannot take an image, so each
// data-URL image is saved to the session's scratchpad, as a goal's images
// are, and the model gets its path, which describe_image can look at; a
// web URL is named as it is.
//
// Nothing is recorded here: a caller that gets an error (an image the
// scratchpad refuses, or a full scratchpad) records nothing of the
// message. The images were checked at the API (attach.CheckImages), so
// what is left to fail is the scratchpad's own bounds.
func (rt *Runtime) imageMessages(ctx context.Context, p *prepared, images []string) ([]*penguinv1.OmniMessage, error) {
	var msgs []*penguinv1.OmniMessage
	saved := false
	// One random stem a message keeps the names of its images apart from
	// those of every other message, steering included.
	stem := "image-" + strings.ToLower(rand.Text()[:10])
	for i, img := range images {
		if p.cfg.Vision {
			msgs = append(msgs, omni.ImageURL(img))
			continue
		}
		ref := img
		if strings.HasPrefix(img, "data:") {
			name, err := rt.pad(p).SaveImage(fmt.Sprintf("%s-%d", stem, i+1), img)
			if err != nil {
				return nil, fmt.Errorf("%w: image %d could not be kept for this text-only model: %v", ErrInvalid, i+1, err)
			}
			ref, saved = scratchpad.Path(name), true
		}
		msgs = append(msgs, omni.UserText(fmt.Sprintf("[attached image %d: %s; this model cannot view images, describe_image can look at it]", i+1, ref)))
	}
	if saved {
		// The scratchpad is part of the agent's working copy: saved to
		// the store, another replica finds the image.
		rt.m.saveAgent(ctx, p.st.Dir)
	}
	return msgs, nil
}
