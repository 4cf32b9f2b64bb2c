// Package agentconfig is the schema of an agent's system_config.yaml: the
// Config type with its defaults (Default, and DefaultYAML, the commented
// file a new agent starts with), its validation, the tool settings and the
// engine's own tools, and the reading and writing of the YAML. Parse reads
// a file over the defaults; unknown keys and bad values are errors naming
// file, line and key. A file may be written in Penguin's spelling, the
// canonical one, or in PenguinHarness's (spelling.go,
// docs/configuration.md), and Marshal always writes Penguin's.
//
// It knows nothing of where a configuration is kept: package agentstate
// owns the agent's directory and reads the file from it.
package agentconfig
