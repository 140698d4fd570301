package dev.rackplan.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** KIP-848 regex members: the epoch-bump variant of a regex, and the topics a registration names. */
class RegexSubscriptionTest {
  static final String ALPHABET = "ab.-_1";

  static String name(Random r) {
    StringBuilder b = new StringBuilder();
    for (int i = 0, n = 1 + r.nextInt(6); i < n; i++) b.append(ALPHABET.charAt(r.nextInt(ALPHABET.length())));
    return b.toString();
  }

  @Test
  void theVariantMatchesThePlanTopicAndOtherwiseExactlyWhatTheRegexMatches() {
    List<String> regexes = List.of("a.*", "a\\..*", "(a|b)-1", "[ab]+", "a.b", ".*_1", "b|a\\.b", "(?i)A.*");
    Random r = new Random(14);
    for (String regex : regexes)
      for (String plan : List.of("_rackplan.plans", "it-1_rackplan.plans", "a.b")) {
        Pattern original = Pattern.compile(regex), variant = Pattern.compile(RackplanConsumer.withPlanTopic(regex, plan));
        // RE2J, as the brokers read a SubscriptionPattern
        com.google.re2j.Pattern re2 = com.google.re2j.Pattern.compile(RackplanConsumer.withPlanTopic(regex, plan));
        com.google.re2j.Pattern re2Original = com.google.re2j.Pattern.compile(regex);
        assertTrue(variant.matcher(plan).matches(), regex + " / " + plan);
        assertTrue(re2.matches(plan), regex + " / " + plan);
        for (int i = 0; i < 500; i++) {
          String t = name(r);
          if (t.equals(plan)) continue;
          assertEquals(original.matcher(t).matches(), variant.matcher(t).matches(), regex + " on " + t);
          assertEquals(re2Original.matches(t), re2.matches(t), regex + " on " + t + " (RE2J)");
          assertEquals(original.matcher(t).matches(), re2Original.matches(t), regex + " on " + t + " (Java = RE2J)");
        }
        // '.' in the plan topic is literal: "_rackplanXplans" is not the plan topic
        assertEquals(original.matcher(plan.replace('.', 'X')).matches(), variant.matcher(plan.replace('.', 'X')).matches());
      }
  }

  @Test
  void aRegexMembersTopicsAreTheMatchingNonInternalNonPlanTopics() {
    Set<String> names = Set.of("orders-eu", "orders-us", "orders", "__consumer_offsets", "_rackplan.plans", "x-orders-eu");
    assertEquals(Set.of("orders-eu", "orders-us"),
        RackplanClient.matching(Pattern.compile("orders-.*"), names, null, "_rackplan.plans"));
    assertEquals(Set.of("orders", "orders-eu", "orders-us", "x-orders-eu"),
        RackplanClient.matching(Pattern.compile(".*orders.*"), names, null, "_rackplan.plans"));
    assertEquals(Set.of("orders", "orders-eu", "orders-us", "x-orders-eu"),
        RackplanClient.matching(Pattern.compile(".*"), names, Pattern.compile(".*_rackplan\\.plans"), "ignored"));
  }

  @Test
  void anRe2RegexJavaCannotReadLeavesTheMemberUnregistered() {
    assertEquals(null, RackplanConsumer.javaRegex("(?P<name>orders)-.*"));
    assertEquals("orders-.*", RackplanConsumer.javaRegex("orders-.*").pattern());
  }
}
