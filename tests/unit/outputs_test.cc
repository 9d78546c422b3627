// The output policy (io/outputs.h, docs/reliability.md "What a command writes"): a command writes only
// what it created or what carries its marker, and nothing it reads.
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "headprune/io/files.h"
#include "headprune/io/formats.h"
#include "headprune/io/outputs.h"
#include "headprune/train/trainer.h"
#include "test_util.h"

namespace hp {
namespace {
namespace fs = std::filesystem;

void put(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}
std::string get(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every regular file under dir with its bytes, and every other entry with its type (links unfollowed).
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> m;
  walk_directory(dir, [&](const DirEntry& e) {
    m[e.path] = e.is_file ? get(e.path) : path_type(e.path);
    return true;
  });
  return m;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(OutputPolicy, ScratchNamesAreHiddenUniqueAndOfThisRun) {
  test::TempDir tmp;
  const std::string a = scratch_name(tmp / "out", "partial"), b = scratch_name(tmp / "out", "partial");
  EXPECT_NE(a, b);
  const std::string name = fs::path(a).filename().string();
  EXPECT_EQ(name.rfind(".out.headprune-partial." + std::to_string(::getpid()) + ".", 0), 0u) << name;
  EXPECT_EQ(fs::path(a).parent_path().string(), tmp.path);
}

TEST(OutputPolicy, UserFilesBesideAnOutputAreNeverTouched) {
  test::TempDir tmp;
  const std::string out = tmp / "out";
  for (const char* s : {".old", ".tmp", ".partial", ".lock"}) put(out + s + "/keep.txt", std::string("user ") + s);
  put(out + ".tmp.123.0", "a file named like an old scratch file");
  put(tmp / ".out.headprune-lock-not", "near miss");
  const auto before = snapshot(tmp.path);
  for (int round = 0; round < 2; ++round) {  // a fresh output, then its replacement
    OutputDir::Options o{"prune"};
    o.overwrite = true;
    OutputDir d(out, o);
    put(d.path() + "/result.json", "{}");
    write_file_atomic(d.path() + "/more.json", "{}");
    d.commit();
  }
  auto after = snapshot(tmp.path);
  for (const auto& [path, bytes] : before) EXPECT_EQ(after[path], bytes) << path;
  EXPECT_EQ(get(out + "/result.json"), "{}");
}

TEST(OutputPolicy, ADirectoryThatIsNotAHeadpruneOutputIsNeverReplaced) {
  test::TempDir tmp;
  const std::string out = tmp / "mine";
  put(out + "/thesis.tex", "years of work");
  for (bool overwrite : {false, true}) {
    OutputDir::Options o{"prune"};
    o.overwrite = overwrite;
    const std::string e = test::error_of([&] { OutputDir d(out, o); });
    EXPECT_TRUE(contains(e, out + ": is a directory that holds files and is not a headprune output")) << e;
    EXPECT_TRUE(contains(e, "never replaces it, even with --overwrite")) << e;
  }
  EXPECT_EQ(get(out + "/thesis.tex"), "years of work");
  // Another kind of headprune output is not replaced either.
  const std::string gates = tmp / "gates";
  {
    OutputDir d(gates, {"gates"});
    d.commit();
  }
  OutputDir::Options o{"prune"};
  o.overwrite = true;
  const std::string e = test::error_of([&] { OutputDir d(gates, o); });
  EXPECT_TRUE(contains(e, "holds a headprune 'gates' output, not a 'prune' one")) << e;
}

TEST(OutputPolicy, LinksFifosDevicesAndFilesAreRefusedAsOutputDirectories) {
  test::TempDir tmp;
  put(tmp / "target/keep.txt", "kept");
  fs::create_directory_symlink(tmp / "target", tmp / "link");
  ASSERT_EQ(::mkfifo((tmp / "fifo").c_str(), 0644), 0);
  put(tmp / "file", "a user's file");
  const auto before = snapshot(tmp.path);
  OutputDir::Options o{"prune"};
  o.overwrite = true;
  for (const auto& [where, type] : std::map<std::string, std::string>{
           {tmp / "link", "a symbolic link"}, {tmp / "fifo", "a FIFO"}, {tmp / "file", "a regular file"},
           {"/dev/null", "a device"}}) {
    const std::string path = where;  // a lambda may not capture a structured binding before C++20 (clang)
    const std::string e = test::error_of([&] { OutputDir d(path, o); });
    EXPECT_TRUE(contains(e, path + ": exists and is " + type)) << e;
  }
  EXPECT_EQ(snapshot(tmp.path), before);
  EXPECT_EQ(path_type("/dev/null"), "a device");
  EXPECT_FALSE(fs::exists("/dev/.null.headprune-lock"));
}

TEST(OutputPolicy, OutputsMustLieApartFromInputsAndEachOther) {
  test::TempDir tmp;
  put(tmp / "ckpt/model.safetensors", "weights");
  put(tmp / "run/best/model.safetensors", "weights");
  const std::vector<NamedPath> ckpt = {{tmp / "ckpt", "the checkpoint"}};
  auto refused = [&](const std::string& out, const std::vector<NamedPath>& inputs) {
    return test::error_of([&] { check_outputs_apart({{out, "--out"}}, inputs); });
  };
  EXPECT_TRUE(contains(refused(tmp / "ckpt", ckpt), "--out " + tmp / "ckpt" + ": is the checkpoint"));
  EXPECT_TRUE(contains(refused(tmp / "ckpt/" + "../ckpt/sub", ckpt), ": is inside the checkpoint"));
  EXPECT_TRUE(contains(refused(tmp / "run", {{tmp / "run/best", "the checkpoint"}}), ": holds the checkpoint"));
  EXPECT_TRUE(contains(refused("/", {}), "is the root directory"));
  EXPECT_TRUE(contains(refused(".", {}), "is the working directory or holds it"));
  EXPECT_TRUE(contains(refused("..", {}), "is the working directory or holds it"));
  if (const char* home = std::getenv("HOME"); home && *home && !path_within(".", home)) {
    EXPECT_TRUE(contains(refused(home, {}), "is the home directory"));
  }
  // Through a symbolic link: the link is resolved.
  fs::create_directory_symlink(tmp / "ckpt", tmp / "alias");
  EXPECT_TRUE(contains(refused(tmp / "alias/out", ckpt), "is inside the checkpoint"));
  // Two outputs of one command.
  const std::string e = test::error_of(
      [&] { check_outputs_apart({{tmp / "x", "--hf"}, {tmp / "x/", "--native"}}, {}); });
  EXPECT_TRUE(contains(e, "--native " + tmp / "x/" + " and --hf " + tmp / "x" + " are the same path")) << e;
  EXPECT_NO_THROW(check_outputs_apart({{tmp / "out", "--out"}}, ckpt));
  EXPECT_NO_THROW(check_outputs_apart({{tmp / "ckpt2", "--out"}}, ckpt));  // a prefix of a name is not "inside"
}

TEST(OutputPolicy, FileOutputsReplaceOnlyTheirOwnKind) {
  test::TempDir tmp;
  const std::string mine = tmp / "bench.json", theirs = tmp / "notes.json", text = tmp / "hyps.txt";
  nlohmann::json earlier = {{"records", nlohmann::json::array()}, {"environment", nlohmann::json::object()}};
  stamp_format(earlier, ResultKind::Bench);
  put(mine, earlier.dump());
  put(theirs, R"({"format": "something else"})");
  put(text, "my translations");
  const OutputFile bench{mine, "--json", "a bench result", json_format_is(format_tag(ResultKind::Bench))};
  EXPECT_NO_THROW(check_output_file(bench));
  write_output_file(bench, "{\"format\": \"headprune-bench/1\", \"new\": 1}");
  EXPECT_TRUE(contains(get(mine), "\"new\": 1"));

  OutputFile other = bench;
  other.path = theirs;
  const std::string e = test::error_of([&] { write_output_file(other, "{}"); });
  EXPECT_TRUE(contains(e, "--json " + theirs + ": exists and is not a bench result written by headprune")) << e;
  EXPECT_EQ(get(theirs), R"({"format": "something else"})");

  OutputFile hyps{text, "--hyps", "translations", nullptr};
  EXPECT_TRUE(contains(test::error_of([&] { check_output_file(hyps); }), "exists; pass --overwrite"));
  hyps.overwrite = true;
  write_output_file(hyps, "new");
  EXPECT_EQ(get(text), "new");

  // Never through a link, into a FIFO or a device, or over an input.
  put(tmp / "target.json", earlier.dump());
  fs::create_symlink(tmp / "target.json", tmp / "link.json");
  ASSERT_EQ(::mkfifo((tmp / "fifo").c_str(), 0644), 0);
  for (const auto& [path, type] : std::map<std::string, std::string>{
           {tmp / "link.json", "a symbolic link"}, {tmp / "fifo", "a FIFO"}, {"/dev/null", "a device"}, {tmp.path, "a directory"}}) {
    OutputFile f = bench;
    f.path = path;
    f.overwrite = true;
    const std::string err = test::error_of([&] { write_output_file(f, "{}"); });
    EXPECT_TRUE(contains(err, path + ": exists and is " + type)) << err;
  }
  EXPECT_EQ(get(tmp / "target.json"), earlier.dump());
  EXPECT_EQ(path_type(tmp / "link.json"), "a symbolic link");
  EXPECT_EQ(path_type("/dev/null"), "a device");
  put(tmp / "ckpt/model.safetensors", "weights");
  OutputFile into = bench;
  into.path = tmp / "ckpt/model.safetensors";
  EXPECT_TRUE(contains(test::error_of([&] { check_output_file(into, {{tmp / "ckpt", "the checkpoint"}}); }),
                       "is inside the checkpoint"));
  EXPECT_EQ(get(tmp / "ckpt/model.safetensors"), "weights");
}

TEST(OutputPolicy, AKilledRunsScratchIsRemovedOnlyWhenItIsOursAndItsProcessIsGone) {
  test::TempDir tmp;
  const std::string out = tmp / "out";
  // A process that is surely gone: a child that has exited and been reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  const std::string dead = std::to_string(child);
  const std::string ours = tmp / (".out.headprune-partial." + dead + ".0123abcd");
  const std::string unmarked = tmp / (".out.headprune-partial." + dead + ".89abcdef");
  const std::string alive = tmp / (".out.headprune-partial.1.0123abcd");  // pid 1 is alive
  const std::string tmpfile = tmp / (".out.headprune-tmp." + dead + ".aaaabbbb");
  put(join_path(ours, kOutputMarker), R"({"kind": "prune"})");
  put(unmarked + "/user.txt", "not ours: no marker");
  put(join_path(alive, kOutputMarker), R"({"kind": "prune"})");
  put(tmpfile, "half a file");
  OutputDir d(out, {"prune"});
  EXPECT_FALSE(fs::exists(ours));
  EXPECT_FALSE(fs::exists(tmpfile));
  EXPECT_TRUE(fs::exists(unmarked + "/user.txt"));
  EXPECT_TRUE(fs::exists(alive));
}

TEST(OutputPolicy, TrainingOverwriteReplacesOnlyATrainingRun) {
  test::TempDir tmp;
  TrainOptions o;
  o.overwrite = true;
  put(tmp / "mine/data.csv", "a user's folder");
  const std::string e = test::error_of([&] { RunDir r(tmp / "mine", o); });
  EXPECT_TRUE(contains(e, "not a headprune training run")) << e;
  EXPECT_EQ(get(tmp / "mine/data.csv"), "a user's folder");
  put(tmp / "file", "x");
  EXPECT_TRUE(contains(test::error_of([&] { RunDir r(tmp / "file", o); }), "exists and is a regular file"));
  EXPECT_TRUE(contains(test::error_of([&] { RunDir r("/dev/null", o); }), "exists and is a device"));
  // Reading from inside the run: refused before anything is removed.
  {
    RunDir fresh(tmp / "run", TrainOptions{});
  }
  put(tmp / "run/best/model.safetensors", "weights");
  EXPECT_TRUE(contains(test::error_of([&] { RunDir r(tmp / "run", o, {{tmp / "run/best", "the checkpoint"}}); }),
                       "holds the checkpoint"));
  EXPECT_EQ(get(tmp / "run/best/model.safetensors"), "weights");
  EXPECT_EQ(output_kind(tmp / "run").value_or(""), kRunKind);
  {
    RunDir again(tmp / "run", o);  // its own earlier run: replaced
  }
  EXPECT_FALSE(fs::exists(tmp / "run/best"));
}

// A full file system and a read-only one, where this process may mount a small tmpfs (root in CI);
// skipped otherwise.
struct SmallMount {
  std::string dir;
  bool ok = false;
  SmallMount(const std::string& d, const char* options) : dir(d) {
    fs::create_directories(dir);
    ok = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, options) == 0;
  }
  ~SmallMount() {
    if (ok) ::umount2(dir.c_str(), MNT_DETACH);
  }
};

TEST(OutputPolicy, AFullOrReadOnlyFileSystemFailsNamingThePathAndLeavesNothing) {
  test::TempDir tmp;
  SmallMount full(tmp / "full", "size=64k");
  if (!full.ok) GTEST_SKIP() << "cannot mount a tmpfs here (not root)";
  const std::string big(200 * 1024, 'x');
  const std::string out = full.dir + "/out";
  const std::string e = test::error_of([&] {
    OutputDir d(out, {"prune"});
    write_file_atomic(d.path() + "/model.safetensors", big);
    d.commit();
  });
  EXPECT_TRUE(contains(e, out + "/model.safetensors (staged in ")) << e;  // named as the user asked for it
  EXPECT_TRUE(contains(e, "write failed (No space left on device")) << e;
  EXPECT_TRUE(list_directory(full.dir).empty());  // no staging, no lock, no OUT
  const OutputFile f{full.dir + "/bench.json", "--json", "a bench result", json_format_is("headprune-bench/")};
  const std::string fe = test::error_of([&] { write_output_file(f, big); });
  EXPECT_TRUE(contains(fe, full.dir + "/bench.json: write failed")) << fe;
  EXPECT_TRUE(list_directory(full.dir).empty());

  SmallMount ro(tmp / "ro", "size=64k");
  ASSERT_TRUE(ro.ok);
  ASSERT_EQ(::mount("tmpfs", ro.dir.c_str(), "tmpfs", MS_REMOUNT | MS_RDONLY, "size=64k"), 0);
  const std::string re = test::error_of([&] { OutputDir d(ro.dir + "/out", {"prune"}); });
  EXPECT_TRUE(contains(re, ro.dir + "/.out.headprune-lock")) << re;
  const OutputFile rf{ro.dir + "/bench.json", "--json", "a bench result", json_format_is("headprune-bench/")};
  const std::string rfe = test::error_of([&] { write_output_file(rf, "{}"); });
  EXPECT_TRUE(contains(rfe, ro.dir + "/bench.json: cannot create a file beside it")) << rfe;
}

}  // namespace
}  // namespace hp
