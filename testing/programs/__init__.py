"""Programs the tests start as processes (servers, toy components)."""
