// The trace the format and simulator consumers read: two callers of one artifact.
#pragma once

inline constexpr const char* kTwoCallersTrace =
    R"({"format": "demandflight-trace", "version": 1, "name": "two-callers"})"
    "\n"
    R"({"op": "artifact", "id": "rock", "resource": "props/rock.ktx2", "revision": "r1", )"
    R"("target": "pc", "generation": 0, "size": 1000000, "origin": "cdn"})"
    "\n"
    R"({"op": "subscribe", "t": 0.0, "demand": "a", "owner": "x", "artifact": "rock", "priority": 1})"
    "\n"
    R"({"op": "subscribe", "t": 0.1, "demand": "b", "owner": "y", "artifact": "rock", "priority": 2})"
    "\n";
