// Package docs holds Penguin's documentation, the Markdown files in this
// directory, and the tests that keep it true: the examples of
// trace-format.md are what the trace encoder writes (and read back as the
// messages they were written from), every link of the documents and the
// README leads to a file of the repository, and no comment, document or
// README points outside the repository.
//
// The package has no code of its own; README.md is the index of the
// documents.
package docs
