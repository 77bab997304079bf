package dev.rl.gateway;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class ReactorNettyCheckTest {
    @Test
    void versionsBefore138AreAffectedAndLaterOnesAndUnknownOnesAreNot() {
        for (String v : new String[] {"1.3.7", "1.3.6", "1.3.0", "1.2.18", "1.1.30", "0.9.25.RELEASE", "1.3.7-SNAPSHOT"}) {
            assertTrue(ReactorNettyCheck.affected(v), v);
        }
        for (String v : new String[] {"1.3.8", "1.3.10", "1.4.0", "2.0.0-M1", "1.3.8-SNAPSHOT", null, "", "x.y"}) {
            assertFalse(ReactorNettyCheck.affected(v), String.valueOf(v));
        }
        assertFalse(ReactorNettyCheck.warnIfAffected("1.3.8"));
        System.out.println("ReactorNettyCheckTest: the warning below, for 1.3.6, is expected");
        assertTrue(ReactorNettyCheck.warnIfAffected("1.3.6"));
    }
}
