#include "core/document.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace baton {
using ::testing::HasSubstr;
namespace {

TEST(DocumentTest, YamlNodesCarryTheirPositions) {
  auto doc = ParseDocument("name: x\ntasks:\n  - name: a\n    run: echo\n", DocumentFormat::kYaml);
  ASSERT_TRUE(doc.root) << doc.error->ToString();
  const Node& root = *doc.root;
  ASSERT_EQ(root.kind, Node::Kind::kMap);
  ASSERT_EQ(root.entries.size(), 2u);
  EXPECT_EQ(root.entries[1].key, "tasks");
  EXPECT_EQ(root.entries[1].key_mark, (Mark{2, 1}));
  const Node& task = root.entries[1].value.items[0];
  EXPECT_EQ(task.entries[1].key_mark, (Mark{4, 5}));
  EXPECT_EQ(task.entries[1].value.text, "echo");
  EXPECT_EQ(task.entries[1].value.mark, (Mark{4, 10}));
}

TEST(DocumentTest, YamlPlainScalarsResolveByTheCoreSchema) {
  auto doc = ParseDocument("a: 1\nb: 1.5\nc: true\nd: ~\ne: '1'\nf: hello\ng: 0x1F\nh: 1e3\n",
                           DocumentFormat::kYaml);
  ASSERT_TRUE(doc.root);
  const auto& e = doc.root->entries;
  EXPECT_EQ(e[0].value.kind, Node::Kind::kInt);
  EXPECT_EQ(e[1].value.kind, Node::Kind::kFloat);
  EXPECT_EQ(e[2].value.kind, Node::Kind::kBool);
  EXPECT_EQ(e[3].value.kind, Node::Kind::kNull);
  EXPECT_EQ(e[4].value.kind, Node::Kind::kString);  // quoted: a string
  EXPECT_EQ(e[5].value.kind, Node::Kind::kString);
  EXPECT_EQ(e[6].value.kind, Node::Kind::kInt);
  EXPECT_EQ(e[7].value.kind, Node::Kind::kFloat);
}

TEST(DocumentTest, JsonNodesCarryTheirPositions) {
  std::string text =
      "{\n  \"name\": \"x\",\n  \"tasks\": [\n    {\"name\": \"a\", \"limit\": 12}\n  ]\n}";
  auto doc = ParseDocument(text, DocumentFormat::kJson);
  ASSERT_TRUE(doc.root) << doc.error->ToString();
  const Node& root = *doc.root;
  EXPECT_EQ(root.mark, (Mark{1, 1}));
  EXPECT_EQ(root.entries[0].key_mark, (Mark{2, 3}));
  EXPECT_EQ(root.entries[0].value.mark, (Mark{2, 11}));
  EXPECT_EQ(root.entries[1].key_mark, (Mark{3, 3}));
  const Node& task = root.entries[1].value.items[0];
  EXPECT_EQ(task.mark, (Mark{4, 5}));
  EXPECT_EQ(task.entries[1].key_mark, (Mark{4, 19}));
  EXPECT_EQ(task.entries[1].value.kind, Node::Kind::kInt);
  EXPECT_EQ(task.entries[1].value.mark, (Mark{4, 28}));
}

TEST(DocumentTest, JsonKeepsTypes) {
  auto doc = ParseDocument(R"({"a":1,"b":1.5,"c":false,"d":null,"e":"1"})", DocumentFormat::kJson);
  ASSERT_TRUE(doc.root);
  const auto& e = doc.root->entries;
  EXPECT_EQ(e[0].value.kind, Node::Kind::kInt);
  EXPECT_EQ(e[1].value.kind, Node::Kind::kFloat);
  EXPECT_EQ(e[1].value.text, "1.5");
  EXPECT_EQ(e[2].value.kind, Node::Kind::kBool);
  EXPECT_EQ(e[3].value.kind, Node::Kind::kNull);
  EXPECT_EQ(e[4].value.kind, Node::Kind::kString);
}

TEST(DocumentTest, YamlSyntaxErrorHasAPosition) {
  auto doc = ParseDocument("name: x\ntasks:\n  - name: [a\n", DocumentFormat::kYaml);
  ASSERT_FALSE(doc.root);
  ASSERT_TRUE(doc.error);
  EXPECT_TRUE(doc.error->mark.known());
  EXPECT_EQ(doc.error->message.rfind("YAML syntax error: ", 0), 0u) << doc.error->message;
}

TEST(DocumentTest, JsonSyntaxErrorHasAPosition) {
  auto doc = ParseDocument("{\n  \"name\": \"x\",\n  \"tasks\": [tru]\n}", DocumentFormat::kJson);
  ASSERT_FALSE(doc.root);
  ASSERT_TRUE(doc.error);
  EXPECT_EQ(doc.error->mark.line, 3);
  EXPECT_EQ(doc.error->message.rfind("JSON syntax error: ", 0), 0u) << doc.error->message;
}

TEST(DocumentTest, EmptyJsonIsAnError) {
  auto doc = ParseDocument("", DocumentFormat::kJson);
  ASSERT_TRUE(doc.error);
  EXPECT_FALSE(doc.root);
}

TEST(DocumentTest, DeepNestingIsRefusedNotACrash) {
  std::string deep_json(100000, '[');
  auto j = ParseDocument(deep_json, DocumentFormat::kJson);
  ASSERT_TRUE(j.error);
  EXPECT_EQ(j.error->message, "document nested too deeply");

  std::string deep_yaml = "a: " + std::string(5000, '[') + std::string(5000, ']');
  auto y = ParseDocument(deep_yaml, DocumentFormat::kYaml);
  ASSERT_TRUE(y.error);
}

TEST(DocumentTest, AliasBombIsRefused) {
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    text += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) text += (k ? ", *a" : "*a") + std::to_string(i - 1);
    text += "]\n";
  }
  auto doc = ParseDocument(text, DocumentFormat::kYaml);
  ASSERT_TRUE(doc.error);
  EXPECT_EQ(doc.error->message, "document too large (too many nodes)");
}

// Few nodes, many bytes: one 1 MiB string aliased 10 times is 11 MiB of text once
// expanded. yaml-cpp shares the aliased node, so only the conversion would copy it.
TEST(DocumentTest, AliasedStringBombIsRefusedByItsExpandedBytes) {
  std::string text = "a: &big " + std::string(1 << 20, 'x') + "\nb: [";
  for (int i = 0; i < 10; ++i) text += i ? ", *big" : "*big";
  text += "]\n";
  auto doc = ParseDocument(text, DocumentFormat::kYaml);
  ASSERT_TRUE(doc.error);
  EXPECT_EQ(doc.error->message,
            "document too large: it expands to more than 8388608 bytes of text (a YAML alias "
            "counts each time it is used)");
}

// yaml-cpp took a NUL for a change of encoding and gave back a name that was not UTF-8
// (found by job_fuzzer); YAML does not allow such characters in a stream at all.
TEST(DocumentTest, AControlCharacterInYamlIsRefusedWithItsPosition) {
  for (std::string bad : {std::string("\0", 1), std::string("\x01"), std::string("\x7F"),
                          std::string("\xC2\x9C"), std::string("\xEF\xBF\xBF")}) {
    auto doc = ParseDocument("name: ok\nrun: a" + bad + "b\n", DocumentFormat::kYaml);
    ASSERT_TRUE(doc.error) << static_cast<int>(bad[0]);
    EXPECT_THAT(doc.error->ToString(), HasSubstr("2:7: the document has a control character"));
  }
  // Tab, line breaks, NEL and the escaped form are fine.
  EXPECT_TRUE(ParseDocument("a:\tb\r\nc: d\xC2\x85"
                            "e\nf: \"\\u0000\"\n",
                            DocumentFormat::kYaml)
                  .root);
  // The fuzzer's input: a NUL inside a long name.
  std::string name = "name: b" + std::string(100, 'N') + std::string("\0", 1) + "Nad\ntasks: []\n";
  EXPECT_TRUE(ParseDocument(name, DocumentFormat::kYaml).error);
}

TEST(DocumentTest, InvalidUtf8IsRefusedWithItsPosition) {
  for (auto format : {DocumentFormat::kYaml, DocumentFormat::kJson}) {
    auto doc = ParseDocument("{\"name\": \"ok\",\n \"run\": \"\x9c\"}", format);
    ASSERT_TRUE(doc.error);
    EXPECT_EQ(doc.error->ToString(), "2:10: the document is not valid UTF-8 (a bad byte here)");
  }
  EXPECT_TRUE(ParseDocument("name: caf\xC3\xA9 \xF0\x9F\x8E\xB5", DocumentFormat::kYaml).root);
  EXPECT_TRUE(ParseDocument("a: \xC0\xAF", DocumentFormat::kYaml).error);      // overlong
  EXPECT_TRUE(ParseDocument("a: \xED\xA0\x80", DocumentFormat::kYaml).error);  // surrogate
}

TEST(DocumentTest, SniffsJsonByItsFirstCharacter) {
  EXPECT_EQ(SniffFormat("  \n{\"a\":1}"), DocumentFormat::kJson);
  EXPECT_EQ(SniffFormat("name: x"), DocumentFormat::kYaml);
  EXPECT_EQ(SniffFormat(""), DocumentFormat::kYaml);
}

TEST(DiagnosticTest, FormatsPositionPathAndMessage) {
  EXPECT_EQ((Diagnostic{{3, 7}, "tasks[1].retry.limit", "too big"}).ToString(),
            "3:7: tasks[1].retry.limit: too big");
  EXPECT_EQ((Diagnostic{{}, "", "bad"}).ToString(), "bad");
}

}  // namespace
}  // namespace baton
