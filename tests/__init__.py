"""The test suite; its folders mirror the package (tests/verbs/ tests mcp_harness/verbs/, and so on), tests of the
top-level modules sit here, and e2e/ and crash/ hold the suites that cross every layer."""
