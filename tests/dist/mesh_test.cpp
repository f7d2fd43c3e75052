// Mesh arithmetic: pure functions, no processes.
#include "runtime/dist/mesh.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "runtime/dist/error.h"

namespace weft::dist {
namespace {

using Groups = std::vector<std::vector<int>>;

MeshShape Shape(int ring, int ulysses, int tp, std::array<Axis, 3> order = {Axis::kTp, Axis::kRing, Axis::kUlysses}) {
  MeshShape s;
  s.ring = ring;
  s.ulysses = ulysses;
  s.tp = tp;
  s.order = order;
  return s;
}

TEST(Mesh, Ring2Ulysses2DefaultOrder) {
  Mesh m(Shape(2, 2, 1), 4);
  EXPECT_EQ(m.Groups(Axis::kUlysses), (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(m.Groups(Axis::kRing), (Groups{{0, 2}, {1, 3}}));
  EXPECT_EQ(m.Groups(Axis::kTp), (Groups{{0}, {1}, {2}, {3}}));
  EXPECT_EQ(m.Groups(Axis::kCp), (Groups{{0, 1, 2, 3}}));
  EXPECT_EQ(m.Groups(Axis::kWorld), (Groups{{0, 1, 2, 3}}));
  EXPECT_EQ(m.CoordsOf(3), (Mesh::Coords{1, 1, 0}));
  EXPECT_EQ(m.CoordsOf(2), (Mesh::Coords{1, 0, 0}));
  EXPECT_EQ(m.AxisRank(2, Axis::kRing), 1);
  EXPECT_EQ(m.AxisRank(2, Axis::kUlysses), 0);
  EXPECT_EQ(m.AxisRank(2, Axis::kCp), 2);
}

TEST(Mesh, Ring2Ulysses2Tp2DefaultOrder) {
  Mesh m(Shape(2, 2, 2), 8);
  EXPECT_EQ(m.Groups(Axis::kUlysses), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(m.Groups(Axis::kRing), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(m.Groups(Axis::kTp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(m.Groups(Axis::kCp), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(m.CoordsOf(6), (Mesh::Coords{1, 0, 1}));
  EXPECT_EQ(m.GroupRanks(6, Axis::kTp), (std::vector<int>{2, 6}));
  EXPECT_EQ(m.GroupIndex(6, Axis::kRing), 2);
  EXPECT_EQ(m.GroupIndex(6, Axis::kCp), 1);
  EXPECT_EQ(m.AxisRank(6, Axis::kCp), 2);
}

TEST(Mesh, Ring2Ulysses2Tp2UlyssesOutermostRingInnermost) {
  Mesh m(Shape(2, 2, 2, {Axis::kUlysses, Axis::kTp, Axis::kRing}), 8);
  EXPECT_EQ(m.Groups(Axis::kRing), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(m.Groups(Axis::kTp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(m.Groups(Axis::kUlysses), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // CP rank = ring * ulysses + ulysses coordinate, whatever the placement order.
  EXPECT_EQ(m.Groups(Axis::kCp), (Groups{{0, 4, 1, 5}, {2, 6, 3, 7}}));
  EXPECT_EQ(m.CoordsOf(5), (Mesh::Coords{1, 1, 0}));
  EXPECT_EQ(m.AxisRank(5, Axis::kCp), 3);
  EXPECT_EQ(m.AxisRank(4, Axis::kCp), 1);
}

TEST(Mesh, Ring3Ulysses2BothOrders) {
  Mesh a(Shape(3, 2, 1), 6);
  EXPECT_EQ(a.Groups(Axis::kUlysses), (Groups{{0, 1}, {2, 3}, {4, 5}}));
  EXPECT_EQ(a.Groups(Axis::kRing), (Groups{{0, 2, 4}, {1, 3, 5}}));
  EXPECT_EQ(a.Groups(Axis::kCp), (Groups{{0, 1, 2, 3, 4, 5}}));
  Mesh b(Shape(3, 2, 1, {Axis::kUlysses, Axis::kRing, Axis::kTp}), 6);
  EXPECT_EQ(b.Groups(Axis::kRing), (Groups{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(b.Groups(Axis::kUlysses), (Groups{{0, 3}, {1, 4}, {2, 5}}));
  EXPECT_EQ(b.Groups(Axis::kCp), (Groups{{0, 3, 1, 4, 2, 5}}));
}

TEST(Mesh, Ulysses3Tp2) {
  Mesh m(Shape(1, 3, 2), 6);
  EXPECT_EQ(m.Groups(Axis::kUlysses), (Groups{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(m.Groups(Axis::kTp), (Groups{{0, 3}, {1, 4}, {2, 5}}));
  EXPECT_EQ(m.Groups(Axis::kRing), (Groups{{0}, {1}, {2}, {3}, {4}, {5}}));
  EXPECT_EQ(m.Groups(Axis::kCp), (Groups{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(m.Size(Axis::kCp), 3);
  EXPECT_EQ(m.Size(Axis::kWorld), 6);
}

// Every shape up to 8 ranks, every order: groups partition the world, have the axis size,
// are ordered by axis rank, and coordinates round-trip.
TEST(Mesh, GroupsPartitionTheWorldForAllShapesAndOrders) {
  std::array<Axis, 3> order = {Axis::kRing, Axis::kUlysses, Axis::kTp};
  std::sort(order.begin(), order.end());
  int shapes = 0;
  do {
    for (int ring = 1; ring <= 8; ++ring)
      for (int ulysses = 1; ring * ulysses <= 8; ++ulysses)
        for (int tp = 1; ring * ulysses * tp <= 8; ++tp) {
          Mesh m(Shape(ring, ulysses, tp, order), ring * ulysses * tp);
          ++shapes;
          for (int r = 0; r < m.world_size(); ++r) EXPECT_EQ(m.RankOf(m.CoordsOf(r)), r);
          for (Axis axis : kAllAxes) {
            std::set<int> seen;
            for (const std::vector<int>& g : m.Groups(axis)) {
              ASSERT_EQ(static_cast<int>(g.size()), m.Size(axis)) << m.shape().ToString();
              for (size_t i = 0; i < g.size(); ++i) {
                EXPECT_TRUE(seen.insert(g[i]).second);
                EXPECT_EQ(m.AxisRank(g[i], axis), static_cast<int>(i));
                EXPECT_EQ(m.GroupRanks(g[i], axis), g);
              }
            }
            EXPECT_EQ(static_cast<int>(seen.size()), m.world_size());
          }
        }
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_GT(shapes, 6 * 20);
}

TEST(Mesh, WorldSizeMismatchIsAnError) {
  try {
    Mesh m(Shape(2, 2, 1), 6);
    FAIL() << "no error";
  } catch (const DistError& e) {
    EXPECT_STREQ(e.what(), "mesh ring=2,ulysses=2,tp=1 has 4 ranks (ring*ulysses*tp) but the world has 6");
  }
  EXPECT_THROW(Mesh(Shape(0, 2, 1), 0), DistError);
  EXPECT_THROW(Mesh(Shape(2, 1, 1, {Axis::kRing, Axis::kRing, Axis::kTp}), 2), DistError);
}

TEST(MeshParse, Specs) {
  MeshShape s = ParseMeshShape("ring=2,ulysses=2,tp=1");
  EXPECT_EQ(s.ring, 2);
  EXPECT_EQ(s.ulysses, 2);
  EXPECT_EQ(s.tp, 1);
  s = ParseMeshShape(" tp = 2 , ulysses=3 ");
  EXPECT_EQ(s.ToString(), "ring=1,ulysses=3,tp=2");
  s = ParseMeshShape("ring=2,order=ulysses:ring:tp");
  EXPECT_EQ(s.order, (std::array<Axis, 3>{Axis::kUlysses, Axis::kRing, Axis::kTp}));
  EXPECT_EQ(s.ToString(), "ring=2,ulysses=1,tp=1,order=ulysses:ring:tp");
  EXPECT_EQ(ParseMeshShape(s.ToString()).ToString(), s.ToString());
  EXPECT_EQ(ParseMeshOrder("tp,ring,ulysses"), (std::array<Axis, 3>{Axis::kTp, Axis::kRing, Axis::kUlysses}));
  EXPECT_EQ(ParseMeshShape("").WorldSize(), 1);
}

TEST(MeshParse, Errors) {
  auto message = [](const char* spec) {
    try {
      ParseMeshShape(spec);
    } catch (const DistError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("pp=2"), "unknown mesh axis `pp` in `pp=2` (axes: ring, ulysses, tp; and order)");
  EXPECT_EQ(message("ring=0"), "mesh axis `ring` has degree `0`; expected a positive integer");
  EXPECT_EQ(message("ring=two"), "mesh axis `ring` has degree `two`; expected a positive integer");
  EXPECT_EQ(message("ring=2,ring=2"), "mesh axis `ring` given twice in `ring=2,ring=2`");
  EXPECT_EQ(message("ring"), "mesh entry `ring` in `ring` is not key=value (e.g. ring=2,ulysses=2,tp=1)");
  EXPECT_EQ(message("order=ring:ring:tp"), "mesh order must name each of ring, ulysses, tp exactly once");
  EXPECT_EQ(message("order=ring:tp"),
            "mesh order `ring:tp` must name the three axes ring, ulysses, tp, outermost first");
}

}  // namespace
}  // namespace weft::dist
